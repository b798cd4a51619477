# shellcheck shell=bash
# The podfence agent and webhook as host processes, for run.sh. Sourced after cluster.sh and
# ../checks.sh; uses RUN, NODE, DP_DIR, AGENT_LOG, METRICS_PORT, WEBHOOK_PORT and the env of
# test/e2e/containerd.sh start (PODFENCE_E2E_NRI_SOCKET).
#
# Two pool configs share one dir ($RUN/pools, as a ConfigMap would hold them; the webhook
# reads both): poolconfig-exclusive.yaml and poolconfig-shared.yaml, each with the
# nodeSelector podfence-e2e/pools=exclusive|shared. The agent's node label picks one.

# agent_start POOLS: the agent on the NRI socket, advertising its pools in DP_DIR, with node
# label podfence-e2e/pools=POOLS (which selects poolconfig-POOLS.yaml); waits for Synchronize.
agent_start() {
	AGENT_OFF=$(log_lines)
	"$RUN/podfence" agent --nri-socket "$PODFENCE_E2E_NRI_SOCKET" --pools "$RUN/pools" \
		--node-name "$NODE" --node-label "podfence-e2e/pools=$1" --checkpoint-dir "$RUN/checkpoint" \
		--start-binary "$RUN/podfence" --device-plugin-dir "$DP_DIR" --resource-domain podfence.io \
		--metrics-address "127.0.0.1:$METRICS_PORT" --kubeconfig "$RUN/agent.kubeconfig" </dev/null >>"$AGENT_LOG" 2>&1 7>&- 8>&- 9>&- &
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
# TokenRequest token), so that its RBAC is what is tested: Events and its Node's info,
# nothing else. Needs deploy/ applied (deploy_manifests).
agent_credentials() {
	AGENT_TOKEN=$(kc create token podfence-agent -n podfence-system --duration 2h) ||
		pf_die "no token for podfence-system/podfence-agent (deploy/ applied?)"
	kubeconfig "$RUN/agent.kubeconfig" "$AGENT_TOKEN"
}

webhook_start() {
	bg_start webhook "$RUN/podfence" webhook --listen "127.0.0.1:$WEBHOOK_PORT" \
		--tls-cert "$RUN/deploy/certs/tls.crt" --tls-key "$RUN/deploy/certs/tls.key" \
		--pools "$RUN/pools" --coresched-profiles "$RUN/profiles.yaml" --reload-interval 2s
	wait_until 20 curl -sf --cacert "$RUN/deploy/certs/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/healthz"
}
