# shellcheck shell=bash
# deploy/ on a real API server, for run.sh: `kubectl apply -k` accepts every object (server
# dry run), the rendered webhook configurations carry hack/certs.sh's CA, and the manifests
# are applied for real. Sourced after cluster.sh (kc) and ../checks.sh; uses REPO, RUN and
# WEBHOOK_PORT. The webhook serves the certificate made here ($RUN/deploy/certs).

# deploy_manifests: the checks above; on return the webhook configurations call the local
# webhook by url, and deploy/'s ServiceAccounts and RBAC exist (see agent_credentials).
deploy_manifests() {
	local n bundle ca out
	cp -r "$REPO/deploy" "$RUN/deploy"
	rm -rf "$RUN/deploy/certs"
	bash "$REPO/hack/certs.sh" -o "$RUN/deploy/certs" --san IP:127.0.0.1 2>>"$RUN/certs.log" ||
		pf_die "hack/certs.sh failed: $(cat "$RUN/certs.log")"
	kc apply -f "$RUN/deploy/namespace.yaml" >/dev/null # namespaced objects need it even in a dry run
	if out=$(kc apply -k "$RUN/deploy" --dry-run=server 2>&1); then
		n=$(grep -c . <<<"$out")
		pass "deploy: kubectl apply -k deploy (server dry run)" "$n objects accepted: $(awk '{print $1}' <<<"$out" | sed 's#\..*/#/#' | tr '\n' ' ' | sed 's/ $//')"
	else
		fail "deploy: kubectl apply -k deploy (server dry run)" "$(tr '\n' ' ' <<<"$out")"
	fi
	kc kustomize "$RUN/deploy" >"$RUN/deploy.yaml"
	kc create --dry-run=client -o json -f "$RUN/deploy.yaml" | jq -s '{apiVersion: "v1", kind: "List", items: .}' >"$RUN/deploy.json"
	ca=$(base64 -w0 <"$RUN/deploy/certs/ca.crt")
	bundle=$(jq -r '[.items[] | select(.kind | endswith("WebhookConfiguration")) | .webhooks[] | .name + "=" + (.clientConfig.caBundle // "" | gsub("\\s"; ""))] | .[]' "$RUN/deploy.json")
	if [[ -n $bundle ]] && ! grep -qv "=$ca\$" <<<"$bundle"; then
		pass "deploy: caBundle" "every webhook entry ($(cut -d= -f1 <<<"$bundle" | tr '\n' ' ' | sed 's/ $//')) carries hack/certs.sh's CA"
	else
		fail "deploy: caBundle" "not the CA of hack/certs.sh in: $(cut -c1-60 <<<"$bundle" | tr '\n' ' ')"
	fi
	# For real, with the webhook configurations calling the local webhook by url (there is no
	# Service routing without kube-proxy and endpoints), the rest as is (no controller runs it).
	jq --arg base "https://127.0.0.1:$WEBHOOK_PORT" '(.items[] | select(.kind | endswith("WebhookConfiguration"))
	  | .webhooks[].clientConfig) |= {url: ($base + .service.path), caBundle}' "$RUN/deploy.json" >"$RUN/deploy-e2e.json"
	if out=$(kc apply -f "$RUN/deploy-e2e.json" 2>&1); then
		pass "deploy: applied" "$(grep -c . <<<"$out") objects; webhooks called at $(jq -r '[.items[] | select(.kind | endswith("WebhookConfiguration")) | .webhooks[].clientConfig.url] | unique | join(" ")' "$RUN/deploy-e2e.json")"
	else
		fail "deploy: applied" "$(tr '\n' ' ' <<<"$out")"
	fi
}
