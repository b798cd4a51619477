# shellcheck shell=bash
# The Helm chart on the node e2e's cluster, for run.sh, after deploy/'s uninstall (the chart's
# objects have the same names): `helm install --wait` of deploy/helm/podfence with the e2e's
# image, pool configs, profiles and node label (what an operator sets: values, no patches),
# so the agent DaemonSet and the webhook Deployment must come up ready as pods (the agent is
# ready once synchronised over NRI); the chart's webhook (its own CA) mutates a pool pod; then
# `helm upgrade` keeps the CA and `helm uninstall` removes every object (helm_install_upgrade,
# helm-install.sh). Uses RUN, REGISTRY, OVERLAY_TAG, API_PORT, NS, X, AGENT_SEL, WEBHOOK_SEL.

prove_helm_install() {
	local args=(--wait --timeout 3m
		--set "image.repository=$REGISTRY/podfence" --set "image.tag=$OVERLAY_TAG" --set image.pullPolicy=IfNotPresent
		--set agent.nodeLabels=podfence.io/pools=e2e
		--set "agent.extraEnv[0].name=KUBERNETES_SERVICE_HOST" --set-string "agent.extraEnv[0].value=127.0.0.1"
		--set "agent.extraEnv[1].name=KUBERNETES_SERVICE_PORT" --set-string "agent.extraEnv[1].value=$API_PORT"
		--set-file "coresched.profiles=$RUN/profiles.yaml")
	local i=0 f
	for f in "$RUN"/pools/poolconfig-*.yaml; do
		args+=(--set "pools.configs[$i].name=$(basename "$f")" --set-file "pools.configs[$i].config=$f")
		i=$((i + 1))
	done
	helm_install_upgrade "$RUN/admin.kubeconfig" "${args[@]}"
}

# helm_after_install KUBECONFIG: the chart's pods run from the e2e image, ready; its webhook
# writes the pool request annotation of a shared-pool pod (server-side dry run).
helm_after_install() {
	local k=(kubectl --kubeconfig "$1" --request-timeout=30s) pods out
	# helm --wait counts a DaemonSet ready with desired - maxUnavailable pods ready: 0 of 1 here.
	"${k[@]}" -n podfence-system wait --for=condition=Ready pod -l "$AGENT_SEL" --timeout=120s >/dev/null 2>&1 || true
	pods=$("${k[@]}" -n podfence-system get pods -l "$AGENT_SEL" -o json | jq -r '[.items[] | .metadata.name + " " +
		.spec.containers[0].image + " ready=" + ([.status.conditions[]? | select(.type == "Ready") | .status] | join(""))] | join(", ")')
	pods+="; "$("${k[@]}" -n podfence-system get pods -l "$WEBHOOK_SEL" -o json | jq -r '[.items[] | .metadata.name + " ready=" +
		([.status.conditions[]? | select(.type == "Ready") | .status] | join(""))] | join(", ")')
	if [[ $pods == *ready=True* && $pods != *ready=False* ]]; then
		pass "helm install: the agent and webhook pods run from the chart, ready" "$pods"
	else
		fail "helm install: the agent and webhook pods run from the chart, ready" "$pods"
	fi
	out=$("${k[@]}" apply --dry-run=server -o json -f - 2>&1 <<EOF2
apiVersion: v1
kind: Pod
metadata: {name: helm-shared, namespace: $NS}
spec:
  automountServiceAccountToken: false
  containers:
    - name: app
      image: busybox
      resources:
        requests: {podfence.io/shared_s: "100"}
        limits: {podfence.io/shared_s: "100"}
EOF2
)
	if [[ $(jq -r '.metadata.annotations["podfence.io/cpu-pools"] // ""' <<<"$out" 2>/dev/null) == *shared_s* ]]; then
		pass "helm install: the chart's webhook mutates a pool pod" "podfence.io/cpu-pools=$(jq -r '.metadata.annotations["podfence.io/cpu-pools"]' <<<"$out")"
	else
		fail "helm install: the chart's webhook mutates a pool pod" "$(head -c 300 <<<"$out")"
	fi
}
