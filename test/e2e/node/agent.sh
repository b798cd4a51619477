# shellcheck shell=bash
# The podfence agent and webhook as host processes, for run.sh. Sourced after cluster.sh and
# ../checks.sh; uses RUN, NODE, DP_DIR, AGENT_LOG, METRICS_PORT, WEBHOOK_PORT and the env of
# test/e2e/containerd.sh start (PODFENCE_E2E_NRI_SOCKET).
#
# Two pool configs share one dir ($RUN/pools, as a ConfigMap would hold them; the webhook
# reads both): poolconfig-exclusive.yaml and poolconfig-shared.yaml, each with the
# nodeSelector podfence-e2e/pools=exclusive|shared. The agent's node label picks one. Agent
# and webhook read the same core-scheduling profiles ($RUN/profiles.yaml, as the DaemonSet and
# the Deployment mount one ConfigMap).

# agent_start POOLS: the agent on the NRI socket, advertising its pools in DP_DIR, with node
# label podfence-e2e/pools=POOLS (which selects poolconfig-POOLS.yaml); waits for Synchronize.
agent_start() {
	AGENT_OFF=$(log_lines)
	"$RUN/podfence" agent --nri-socket "$PODFENCE_E2E_NRI_SOCKET" --pools "$RUN/pools" \
		--node-name "$NODE" --node-label "podfence-e2e/pools=$1" --checkpoint-dir "$RUN/checkpoint" \
		--start-binary "$RUN/podfence" --device-plugin-dir "$DP_DIR" --resource-domain podfence.io \
		--coresched-profiles "$RUN/profiles.yaml" --metrics-address "127.0.0.1:$METRICS_PORT" \
		--kubeconfig "$RUN/agent.kubeconfig" </dev/null >>"$AGENT_LOG" 2>&1 7>&- 8>&- 9>&- &
	# shellcheck disable=SC2154 # BG_PID is cluster.sh's associative array
	BG_PID[agent]=$!
	if ! wait_log "$AGENT_OFF" 'msg=synchronized' 30 >/dev/null; then
		fail "agent start (node label podfence-e2e/pools=$1)" "no msg=synchronized within 30s; agent $(bg_running agent && echo running || echo exited)"
		return 1
	fi
	pf_log "agent up (pid ${BG_PID[agent]}, node label podfence-e2e/pools=$1)"
}
agent_stop() { bg_stop agent 10; }

# agent_credentials: the agent talks to the API server as deploy/'s ServiceAccount (a
# TokenRequest token), so that its RBAC and deploy/agent/node-patch-policy.yaml are what is
# tested: Events, metrics token reviews and its Node's info, nothing else. Its kubeconfig
# names a tokenFile, which the agent re-reads on each request (as it re-reads the projected
# token of its pod): first a token without a node claim (the Node does not exist before the
# kubelet registers it), then agent_node_token's. Needs deploy/ applied (deploy_manifests).
AGENT_TOKEN_FILE=$RUN/agent.token
agent_credentials() {
	agent_token_write "" || pf_die "no token for podfence-system/podfence-agent (deploy/ applied?)"
	kubeconfig "$RUN/agent.kubeconfig" ""
	kubectl config --kubeconfig "$RUN/agent.kubeconfig" set users.e2e.tokenFile "$AGENT_TOKEN_FILE" >/dev/null
}

# agent_node_token: a token bound to the Node (claim authentication.kubernetes.io/node-name,
# as the DaemonSet pod's projected token carries its node's), once the kubelet has registered
# it: the node-patch policy lets the agent patch that Node only.
agent_node_token() {
	agent_token_write "$NODE" || pf_die "no token of podfence-system/podfence-agent bound to node $NODE"
}

# agent_token_write [NODE]: a new 2-hour token into AGENT_TOKEN_FILE (renamed into place).
agent_token_write() {
	kc create token podfence-agent -n podfence-system --duration 2h \
		${1:+--bound-object-kind Node --bound-object-name "$1"} >"$AGENT_TOKEN_FILE.new" &&
		mv -f "$AGENT_TOKEN_FILE.new" "$AGENT_TOKEN_FILE"
}

webhook_start() {
	bg_start webhook "$RUN/podfence" webhook --listen "127.0.0.1:$WEBHOOK_PORT" \
		--tls-cert "$RUN/deploy/certs/tls.crt" --tls-key "$RUN/deploy/certs/tls.key" \
		--pools "$RUN/pools" --coresched-profiles "$RUN/profiles.yaml" --reload-interval 2s
	wait_until 20 curl -sf --cacert "$RUN/deploy/certs/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/healthz"
}
