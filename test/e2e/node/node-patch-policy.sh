# shellcheck shell=bash
# Proof: deploy/agent/node-patch-policy.yaml (a ValidatingAdmissionPolicy) narrows the agent's
# "patch nodes" (RBAC: every Node, every field) to its own Node's podfence.io/core-sched label
# and podfence.io/physical-cores annotation. The agent pod's projected token is bound to the
# pod and carries its node (claim authentication.kubernetes.io/node-name), and its own
# patches (--publish-node-info) pass; with that token (read in the pod), a patch as the
# agent's: the podfence label on NODE is allowed, another label is refused, a second (fake,
# kubelet-less) Node is refused, and a token without the node claim is refused, each with the
# policy's message. Sourced by run.sh after facts.sh and agent.sh; uses RUN, NODE, API_PORT,
# AGENT_LOG and agent_token.

NP_OTHER=pf-e2e-other-node # the fake second Node

# as_agent TOKEN PATCH NODE: a merge patch of NODE with TOKEN, as the agent sends it (curl:
# `kubectl patch` gets the Node first, which the agent's RBAC does not allow); NP_OUT is
# "<status> <the Status message or the Node's name>".
NP_OUT=""
as_agent() {
	local code
	code=$(curl -s --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $1" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		-d "$2" -o "$RUN/np.out" -w '%{http_code}' "https://127.0.0.1:$API_PORT/api/v1/nodes/$3?fieldManager=e2e-as-agent") || true
	NP_OUT="${code:-000} $(jq -r 'if .kind == "Status" then .message else "\(.kind)/\(.metadata.name)" end' "$RUN/np.out" 2>/dev/null)"
	[[ $code == 200 ]]
}

# expect_np_denied WHAT TOKEN PATCH NODE ERE: the patch is refused (403) by the policy with a
# message matching ERE.
expect_np_denied() {
	if as_agent "$2" "$3" "$4"; then
		fail "$1" "patch allowed ($NP_OUT); want it denied matching /$5/"
	elif grep -qE -- "^403 .*ValidatingAdmissionPolicy 'podfence-agent-node-patch' .*denied request: .*$5" <<<"$NP_OUT"; then
		pass "$1" "$NP_OUT"
	else
		fail "$1" "refused without /$5/: $NP_OUT"
	fi
}

np_label() { kc get node "$1" -o json | jq -r --arg k "$2" '.metadata.labels[$k] // "<none>"'; }

prove_node_patch_policy() {
	local bound claim mf was tok
	if ! bound=$(agent_token 2>&1); then
		fail "node-patch policy: the agent pod's token" "kubectl exec $AGENT_POD -- cat the token: $bound"
		return 0
	fi
	kubeconfig "$RUN/agent.kubeconfig" "$bound"
	expect_eq "node-patch policy: applied from deploy/" \
		"$(kc get validatingadmissionpolicybinding podfence-agent-node-patch -o jsonpath='{.spec.policyName} {.spec.validationActions}' 2>&1)" \
		'podfence-agent-node-patch ["Deny"]' "binding"
	# The agent's token names its pod and node; its own publishing went through (expect_node_info).
	claim=$(kubectl --kubeconfig "$RUN/agent.kubeconfig" auth whoami -o json 2>&1 | jq -r '.status.userInfo | "\(.username) node-name=\(.extra["authentication.kubernetes.io/node-name"] // [] | join(",")) pod-name=\(.extra["authentication.kubernetes.io/pod-name"] // [] | join(","))"' 2>&1)
	mf=$(kc get node "$NODE" -o json --show-managed-fields | jq -r '[.metadata.managedFields[] | select(.manager == "podfence-agent") | .operation] | join(",")')
	if [[ $claim == "system:serviceaccount:$PF_NS:podfence-agent node-name=$NODE pod-name=$AGENT_POD" && $mf == Update ]] &&
		grep -qa 'msg="published node info"' "$AGENT_LOG"; then
		pass "node-patch policy: the agent pod's projected token is bound to $NODE and its own node-info patch passes" \
			"$claim; node $NODE managedFields manager=podfence-agent ($mf); agent log: $(log_msg "$(grep -a 'msg="published node info"' "$AGENT_LOG" | tail -n1)")"
	else
		fail "node-patch policy: the agent pod's projected token is bound to $NODE and its own node-info patch passes" \
			"whoami: $claim; managedFields podfence-agent: ${mf:-<none>}; agent log: $(grep -a 'node info' "$AGENT_LOG" | tail -n 2 | tr '\n' '|')"
	fi

	# Its own label, changed and changed back (the extender's checks read it later).
	was=$(np_label "$NODE" podfence.io/core-sched)
	if as_agent "$bound" '{"metadata":{"labels":{"podfence.io/core-sched":"e2e-policy"}}}' "$NODE" &&
		[[ $(np_label "$NODE" podfence.io/core-sched) == e2e-policy ]] &&
		as_agent "$bound" "{\"metadata\":{\"labels\":{\"podfence.io/core-sched\":\"$was\"}}}" "$NODE"; then
		pass "node-patch policy: the agent may change podfence.io/core-sched on its own Node" \
			"merge patches as podfence-agent: core-sched=$was -> e2e-policy -> $(np_label "$NODE" podfence.io/core-sched)"
	else
		fail "node-patch policy: the agent may change podfence.io/core-sched on its own Node" "$NP_OUT"
	fi
	expect_np_denied "node-patch policy: another label on its own Node is denied" "$bound" \
		'{"metadata":{"labels":{"podfence-e2e/other":"x"}}}' "$NODE" \
		"may change only label podfence.io/core-sched and annotation podfence.io/physical-cores of its Node; this request changes labels podfence-e2e/other"
	expect_np_denied "node-patch policy: its own Node's spec is denied" "$bound" '{"spec":{"unschedulable":true}}' "$NODE" \
		"this request changes its spec"

	# A second Node (no kubelet: an object only), as a compromised agent would reach for.
	kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata: {name: $NP_OTHER, labels: {kubernetes.io/hostname: $NP_OTHER}}
EOF
	expect_np_denied "node-patch policy: another Node is denied" "$bound" \
		'{"metadata":{"labels":{"podfence.io/core-sched":"supported"}}}' "$NP_OTHER" \
		"may patch only its own Node: its token is bound to node $NODE, not to $NP_OTHER"
	kc delete node "$NP_OTHER" --wait=true --timeout=30s >/dev/null 2>&1 || pf_log "warning: kubectl delete node $NP_OTHER did not finish"

	# A token of the same ServiceAccount without the node claim patches no Node.
	if tok=$(kc create token podfence-agent -n "$PF_NS" --duration 10m 2>&1); then
		expect_np_denied "node-patch policy: a token without node claim is denied, even on $NODE" "$tok" \
			'{"metadata":{"labels":{"podfence.io/core-sched":"supported"}}}' "$NODE" \
			"may patch only its own Node: its token names no node"
	else
		fail "node-patch policy: a token without node claim is denied" "no token: $tok"
	fi
	expect_eq "node-patch policy: denied patches changed nothing" "$(kc get node "$NODE" -o json | jq -r '.metadata.labels as $l |
		"core-sched=\($l["podfence.io/core-sched"] // "<none>") podfence-e2e/other=\($l["podfence-e2e/other"] // "<none>") unschedulable=\(.spec.unschedulable // false)"')" \
		"core-sched=$was podfence-e2e/other=<none> unschedulable=false" "node $NODE"
}
