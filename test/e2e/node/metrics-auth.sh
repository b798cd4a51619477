# shellcheck shell=bash
# shellcheck disable=SC2034 # METRICS_READER_TOKEN is read by coresched-tenancy.sh
# Proof: the agent's /metrics and /state are HTTPS (its self-signed certificate) and only for
# a bearer token the API server accepts (TokenReview) and RBAC allows to get the path
# (SubjectAccessReview, ClusterRole podfence-metrics-reader of deploy/agent/rbac.yaml), asked
# through the agent's own API client. No token, a made-up one: 401; plain HTTP: 400; a
# ServiceAccount without the role: 403; one bound to it: 200; /healthz and /readyz are open.
# Sourced by run.sh after facts.sh and agent.sh; uses RUN, NS, METRICS_HOST and METRICS_PORT
# (deploy/'s agent pod serves $(POD_IP):9464: the node's address, it is on the host network).
# Sets METRICS_READER_TOKEN for the later proofs (coresched-tenancy.sh).

METRICS_READER=pf-e2e-metrics-reader # ServiceAccount in NS, bound to podfence-metrics-reader
METRICS_READER_TOKEN=""

# metrics_get PATH [TOKEN [SCHEME]]: GET of the agent's PATH (curl -k: the certificate is
# self-signed); prints "<status> <body, one line, cut>" and leaves the body in $RUN/metrics.body.
metrics_get() {
	local url=https://$METRICS_HOST:$METRICS_PORT$1 code
	[[ ${3:-https} == http ]] && url=http://$METRICS_HOST:$METRICS_PORT$1
	code=$(curl -sk -o "$RUN/metrics.body" -w '%{http_code}' ${2:+-H "Authorization: Bearer $2"} "$url") || true
	printf '%s %s\n' "${code:-000}" "$(tr '\n' ' ' <"$RUN/metrics.body" 2>/dev/null | cut -c1-120 | sed 's/ *$//')"
}

# expect_metrics WHAT CODE TOKEN PATH...: each PATH answers CODE to TOKEN ("" for none).
expect_metrics() {
	local what=$1 want=$2 token=$3 p got facts="" bad=""
	shift 3
	for p in "$@"; do
		got=$(metrics_get "$p" "$token")
		facts+="${facts:+; }$p: $got"
		[[ ${got%% *} == "$want" ]] || bad+="${bad:+; }$p: $got (want $want)"
	done
	if [[ -z $bad ]]; then pass "$what" "$facts"; else fail "$what" "$bad"; fi
}

prove_metrics_auth() {
	local got tok
	got=$(metrics_get /healthz)
	if ! grep -qa 'msg="serving metrics".*scheme=https auth=kubernetes' "$AGENT_LOG"; then
		fail "metrics auth: the agent serves HTTPS with --metrics-auth=kubernetes" "agent log: $(grep -a 'serving metrics' "$AGENT_LOG" | tail -n1)"
	elif [[ $got == "200 ok" ]] && [[ $(metrics_get /readyz) == "200 ok" ]]; then
		pass "metrics auth: /healthz and /readyz without a token" "$METRICS_HOST:$METRICS_PORT (node $NODE's InternalIP $(kc get node "$NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')): 200 ok, 200 ok; agent log: $(log_msg "$(grep -a 'msg="serving metrics"' "$AGENT_LOG" | tail -n1)")"
	else
		fail "metrics auth: /healthz and /readyz without a token" "/healthz: $got; /readyz: $(metrics_get /readyz) (want 200 ok)"
	fi
	expect_metrics "metrics auth: no token: 401" 401 "" /metrics /state
	expect_metrics "metrics auth: a token the API server does not know: 401" 401 "made-up.$RANDOM.token" /metrics
	got=$(metrics_get /metrics "" http)
	expect_eq "metrics auth: plain HTTP on the HTTPS port: 400" "$got" "400 Client sent an HTTP request to an HTTPS server." "answer"

	# A ServiceAccount with no role for the paths: the API server knows it, RBAC refuses it.
	if tok=$(kc create token default -n "$NS" --duration 10m 2>&1); then
		expect_metrics "metrics auth: ServiceAccount $NS/default without podfence-metrics-reader: 403" 403 "$tok" /metrics /state
	else
		fail "metrics auth: ServiceAccount $NS/default without podfence-metrics-reader: 403" "no token: $tok"
	fi

	# One bound to deploy/'s ClusterRole podfence-metrics-reader, as Prometheus's would be.
	tok=""
	if ! got=$(kc create serviceaccount "$METRICS_READER" -n "$NS" 2>&1 && kc create clusterrolebinding "$METRICS_READER" \
		--clusterrole podfence-metrics-reader --serviceaccount "$NS:$METRICS_READER" 2>&1) ||
		! tok=$(kc create token "$METRICS_READER" -n "$NS" --duration 1h 2>&1); then
		fail "metrics auth: ServiceAccount bound to podfence-metrics-reader" "$(tr '\n' ' ' <<<"$got ${tok:0:200}")"
		return 0
	fi
	METRICS_READER_TOKEN=$tok
	got=$(metrics_get /metrics "$tok")
	if [[ ${got%% *} == 200 ]] && grep -qx 'podfence_agent_ready 1' "$RUN/metrics.body"; then
		pass "metrics auth: ServiceAccount bound to podfence-metrics-reader: /metrics 200" \
			"$(grep -c '^podfence_' "$RUN/metrics.body") podfence_* samples, $(grep -x 'podfence_agent_ready 1' "$RUN/metrics.body")"
	else
		fail "metrics auth: ServiceAccount bound to podfence-metrics-reader: /metrics 200" "$got; podfence_agent_ready: $(grep '^podfence_agent_ready' "$RUN/metrics.body")"
	fi
	got=$(metrics_get /state "$tok")
	if [[ ${got%% *} == 200 ]] && [[ $(jq -r '"\(.node) \(.source) \(.ready)"' "$RUN/metrics.body" 2>/dev/null) == "$NODE agent true" ]]; then
		pass "metrics auth: ServiceAccount bound to podfence-metrics-reader: /state 200" \
			"node report: $(jq -c '{node, source, ready, pools: [.pools[].name]}' "$RUN/metrics.body")"
	else
		fail "metrics auth: ServiceAccount bound to podfence-metrics-reader: /state 200" "$got (want 200, node $NODE, source agent, ready)"
	fi
}
