# shellcheck shell=bash
# deploy/ on the real cluster as an operator installs it, for run.sh: `kubectl apply -k` of an
# overlay of deploy/ that sets only what an operator sets (overlay_write), the agent and the
# webhook then running as deploy/'s DaemonSet and Deployment pods from the run's image. Sourced
# after cluster.sh (kc), node.sh and ../checks.sh; uses REPO, RUN, NODE, API_PORT and IMAGE_REF.
#
# The overlay ($RUN/overlay, over a copy of deploy/ with hack/certs.sh's certificates):
#   images:             the podfence image: $REGISTRY/podfence:<OVERLAY_TAG>
#   configMapGenerator: the pool ConfigMap (both configs of pool_configs) and the core-scheduling
#                       profiles, replaced
#   patches:            the DaemonSet's nodeSelector value (podfence.io/pools=e2e), its
#                       PODFENCE_NODE_LABEL while deploy/ sets one (OVERLAY_POOLS picks the
#                       config), and KUBERNETES_SERVICE_HOST/PORT: the API server's address,
#                       as a cluster without kube-proxy gives its host-network agents (no
#                       ClusterIP routes here); with component dra, the same for DaemonSet
#                       podfence-dra, on the host's network
# The webhook configurations keep `service:`: the API server calls the Service's endpoints.

# shellcheck disable=SC2034 # AGENT_SEL is agent.sh's
PF_NS=podfence-system # deploy/kustomization.yaml's namespace
OVERLAY=$RUN/overlay
OVERLAY_TAG=e2e-1
OVERLAY_POOLS=exclusive
AGENT_SEL=app.kubernetes.io/name=podfence,app.kubernetes.io/component=agent
WEBHOOK_SEL=app.kubernetes.io/name=podfence,app.kubernetes.io/component=webhook

# label_env_shipped: deploy/'s DaemonSet selects the pool config by PODFENCE_NODE_LABEL (the
# agent does not read its Node's labels from the API); else the node label alone does.
label_env_shipped() { grep -q 'name: PODFENCE_NODE_LABEL' "$RUN/deploy/agent/daemonset.yaml"; }

# overlay_write: $OVERLAY/kustomization.yaml for OVERLAY_TAG and OVERLAY_POOLS. The pool
# ConfigMap holds every pool config of $RUN/pools.
overlay_write() {
	local env="" files dra=""
	mkdir -p "$OVERLAY"
	rm -f "$OVERLAY"/poolconfig-*.yaml
	cp "$RUN"/pools/poolconfig-*.yaml "$OVERLAY/"
	files=$(cd "$RUN/pools" && printf '%s\n' poolconfig-*.yaml | paste -sd, - | sed 's/,/, /g')
	cp "$RUN/profiles.yaml" "$OVERLAY/coresched-profiles.yaml"
	# With deploy/'s component dra on (dra.sh), the driver's DaemonSet runs on the same nodes
	# and reaches the API server the same way: on the host's network (this cluster has no
	# kube-proxy), at the API server's address.
	grep -qx '  - dra' "$RUN/deploy/kustomization.yaml" && dra="
  - target: {kind: DaemonSet, name: podfence-dra}
    patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: podfence-dra}
      spec:
        template:
          spec:
            nodeSelector: {podfence.io/pools: e2e}
            hostNetwork: true
            dnsPolicy: ClusterFirstWithHostNet
            containers:
              - name: podfence-dra
                env:
                  - {name: KUBERNETES_SERVICE_HOST, value: \"127.0.0.1\"}
                  - {name: KUBERNETES_SERVICE_PORT, value: \"$API_PORT\"}"
	label_env_shipped && env="
                  - {name: PODFENCE_NODE_LABEL, value: \"podfence.io/pools=e2e,podfence-e2e/pools=$OVERLAY_POOLS\"}"
	cat >"$OVERLAY/kustomization.yaml" <<EOF
# Written by test/e2e/node/deploy-manifests.sh: what an operator sets over deploy/.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../deploy]
images:
  - {name: ghcr.io/podfence/podfence, newName: $REGISTRY/podfence, newTag: $OVERLAY_TAG}
generatorOptions: {disableNameSuffixHash: true}
configMapGenerator:
  - name: podfence-pools
    namespace: $PF_NS
    behavior: replace
    files: [$files]
  - name: podfence-coresched-profiles
    namespace: $PF_NS
    behavior: replace
    files: [coresched-profiles.yaml]
patches:
  - target: {kind: DaemonSet, name: podfence-agent}
    patch: |-
      apiVersion: apps/v1
      kind: DaemonSet
      metadata: {name: podfence-agent}
      spec:
        template:
          spec:
            nodeSelector: {podfence.io/pools: e2e}
            containers:
              - name: agent
                env:$env
                  - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
                  - {name: KUBERNETES_SERVICE_PORT, value: "$API_PORT"}$dra
EOF
}

# deploy_manifests: server dry run, the caBundle, the apply; then the agent pod (synchronized
# with containerd over NRI) and both webhook replicas behind the Service.
deploy_manifests() {
	local n out eps
	cp -r "$REPO/deploy" "$RUN/deploy"
	rm -rf "$RUN/deploy/certs" "$RUN/deploy/helm"
	bash "$REPO/hack/certs.sh" -o "$RUN/deploy/certs" 2>>"$RUN/certs.log" ||
		pf_die "hack/certs.sh failed: $(cat "$RUN/certs.log")"
	overlay_write
	kc apply -f "$RUN/deploy/namespace.yaml" >/dev/null # namespaced objects need it even in a dry run
	if out=$(kc apply -k "$OVERLAY" --dry-run=server 2>&1); then
		n=$(grep -c . <<<"$out")
		pass "deploy: kubectl apply -k (overlay of deploy/, server dry run)" "$n objects accepted: $(awk '{print $1}' <<<"$out" | sed 's#\..*/#/#' | tr '\n' ' ' | sed 's/ $//')"
	else
		fail "deploy: kubectl apply -k (overlay of deploy/, server dry run)" "$(tr '\n' ' ' <<<"$out")"
	fi
	kc kustomize "$OVERLAY" >"$RUN/deploy.yaml"
	kc create --dry-run=client -o json -f "$RUN/deploy.yaml" | jq -s '{apiVersion: "v1", kind: "List", items: .}' >"$RUN/deploy.json"
	expect_ca_bundle
	if out=$(kc apply -k "$OVERLAY" 2>&1); then
		pass "deploy: applied" "$(grep -c . <<<"$out") objects; webhooks call $(jq -r '[.items[] | select(.kind | endswith("WebhookConfiguration")) | .webhooks[].clientConfig.service | "Service \(.namespace)/\(.name):\(.port)"] | unique | join(" ")' "$RUN/deploy.json")"
	else
		fail "deploy: applied" "$(tr '\n' ' ' <<<"$out")"
	fi
	if agent_wait "" 0 180 && [[ $(agent_image) == *"@${IMAGE_REF[$OVERLAY_TAG]#*@})" ]]; then
		pass "agent: deploy/'s DaemonSet pod runs the image from the run's registry" \
			"pod $AGENT_POD on $(kc get pod -n "$PF_NS" "$AGENT_POD" -o jsonpath='{.spec.nodeName}'), image $(agent_image), synchronized over NRI; agent log: $(log_msg "$(grep -a 'msg=starting' "$AGENT_LOG" | tail -n1 | cut -c1-160)")"
	else
		fail "agent: deploy/'s DaemonSet pod runs the image from the run's registry" "${AGENT_WAIT_ERR:-image $(agent_image), pushed ${IMAGE_REF[$OVERLAY_TAG]}}"
	fi
	if kc rollout status deploy/podfence-webhook -n "$PF_NS" --timeout=180s >/dev/null 2>&1 && wait_until 30 test_endpoints 2; then
		eps=$(kc get endpoints podfence-webhook -n "$PF_NS" -o jsonpath='{range .subsets[*].addresses[*]}{.ip} {end}')
		pass "webhook: deploy/'s Deployment, 2 replicas behind Service podfence-webhook" \
			"endpoints ${eps% }:8443 (pod network $CNI_SUBNET, from kube-controller-manager); images $(kc get pods -n "$PF_NS" -l "$WEBHOOK_SEL" -o jsonpath='{.items[*].spec.containers[0].image}')"
	else
		fail "webhook: deploy/'s Deployment, 2 replicas behind Service podfence-webhook" \
			"$(kc get pods -n "$PF_NS" -l "$WEBHOOK_SEL" -o wide 2>&1 | tail -n +2 | tr '\n' ';'); endpoints: $(kc get endpoints podfence-webhook -n "$PF_NS" -o jsonpath='{.subsets}' 2>&1)"
	fi
	expect_log "agent: API credentials from its pod's projected ServiceAccount token" 0 'msg="API server" .*credentials="in-cluster service account"' 5
	expect_start_binary
}

# expect_ca_bundle: every rendered webhook entry carries hack/certs.sh's CA and calls the Service.
expect_ca_bundle() {
	local ca bundle
	ca=$(base64 -w0 <"$RUN/deploy/certs/ca.crt")
	bundle=$(jq -r '[.items[] | select(.kind | endswith("WebhookConfiguration")) | .webhooks[] | .name + "=" + (.clientConfig.caBundle // "" | gsub("\\s"; "")) + (if .clientConfig.service then "" else " (no service)" end)] | .[]' "$RUN/deploy.json")
	if [[ -n $bundle ]] && ! grep -qv "=$ca\$" <<<"$bundle"; then
		pass "deploy: caBundle" "every webhook entry ($(cut -d= -f1 <<<"$bundle" | tr '\n' ' ' | sed 's/ $//')) carries hack/certs.sh's CA and calls the Service"
	else
		fail "deploy: caBundle" "not the CA of hack/certs.sh, or no service: $(cut -c1-60 <<<"$bundle" | tr '\n' ' ')"
	fi
}

# test_endpoints N: the webhook Service has N ready endpoints.
test_endpoints() {
	[[ $(kc get endpoints podfence-webhook -n "$PF_NS" -o jsonpath='{range .subsets[*].addresses[*]}{.ip}{"\n"}{end}' | grep -c .) == "$1" ]]
}

# expect_start_binary: the initContainer put the image's podfence at /opt/podfence/bin on the node.
expect_start_binary() {
	local v
	if v=$(node_ns /opt/podfence/bin/podfence version 2>&1) && [[ $v == *"$OVERLAY_TAG"* ]]; then
		pass "agent: the initContainer installed the start binary on the node" "/opt/podfence/bin/podfence version: $v"
	else
		fail "agent: the initContainer installed the start binary on the node" "/opt/podfence/bin/podfence version: $v (want $OVERLAY_TAG)"
	fi
}
