# shellcheck shell=bash
# The podfence agent as deploy/'s DaemonSet pod, for run.sh: its log, its pod, container and
# process, its replacement (a deleted pod, a rollout, a relabel) and its token. Sourced after
# cluster.sh, node.sh, deploy-manifests.sh and ../checks.sh; uses RUN, NODE, PF_NS, AGENT_SEL.
#
# The agent's log: agent_log_follow copies every agent container's log, as the kubelet writes
# it (CRI format, one file per container in podLogsDir), into AGENT_LOG without the CRI prefix,
# one `--- <file>` line where each begins, so that checks.sh's log helpers (wait_log,
# expect_log: offsets into one growing file) read all the agent pods of the run in order.

# shellcheck disable=SC2034 # METRICS_PORT and METRICS_HOST are metrics-auth.sh's
AGENT_LOG=$RUN/agent.log
AGENT_POD="" AGENT_UID="" AGENT_OFF=0 AGENT_WAIT_ERR=""
METRICS_PORT=9464 # deploy/'s --metrics-address $(POD_IP):9464 (and probes, containerPort)
METRICS_HOST=""   # the agent pod's IP: the node's (hostNetwork)

agent_log_follow() {
	local f n total
	local -A seen=()
	while :; do
		for f in "$RUN"/pod-logs/"$PF_NS"_podfence-agent-*/agent/*.log; do
			[[ -f $f ]] || continue
			n=${seen[$f]:-0} total=$(wc -l <"$f")
			((total > n)) || continue
			((n > 0)) || printf -- '--- %s\n' "${f#"$RUN"/pod-logs/}"
			sed -n "$((n + 1)),${total}p" "$f" | cut -d' ' -f4-
			seen[$f]=$total
		done >>"$AGENT_LOG"
		sleep 0.2
	done
}

# agent_new OLD_UID: "name uid podIP" of an agent pod not being deleted, other than OLD_UID,
# whose container agent runs; empty if none.
agent_new() {
	kc get pods -n "$PF_NS" -l "$AGENT_SEL" -o json | jq -r --arg old "$1" '[.items[]
	  | select(.metadata.deletionTimestamp == null and .metadata.uid != $old and
	      ([.status.containerStatuses[]? | select(.name == "agent" and .state.running)] | length) > 0)]
	  | first // empty | "\(.metadata.name) \(.metadata.uid) \(.status.podIP)"'
}
test_agent_new() { [[ -n $(agent_new "$1") ]]; }

# agent_wait OLD_UID OFFSET [SECONDS]: waits (default 90 s) for a running agent pod other than
# OLD_UID and a msg=synchronized after log line OFFSET; sets AGENT_POD, AGENT_UID and
# METRICS_HOST, or AGENT_WAIT_ERR and false.
agent_wait() {
	if ! wait_until "${3:-90}" test_agent_new "$1"; then
		AGENT_WAIT_ERR="no new running agent pod within ${3:-90}s: $(kc get pods -n "$PF_NS" -l "$AGENT_SEL" -o wide 2>&1 | tail -n +2 | tr '\n' ';') $(kc get events -n "$PF_NS" --field-selector type=Warning -o jsonpath='{range .items[*]}{.reason}: {.message}{"; "}{end}' 2>&1 | tail -c 400)"
		return 1
	fi
	read -r AGENT_POD AGENT_UID METRICS_HOST <<<"$(agent_new "$1")"
	if ! wait_log "$2" 'msg=synchronized' 60 >/dev/null; then
		AGENT_WAIT_ERR="agent pod $AGENT_POD runs, but logged no msg=synchronized within 60s: $(log_since "$2" | tail -n 4 | tr '\n' '|')"
		return 1
	fi
}

# agent_image: the image of the running agent pod's container and the digest the runtime pulled.
agent_image() {
	kc get pod -n "$PF_NS" "$AGENT_POD" -o jsonpath='{.spec.containers[0].image} ({.status.containerStatuses[0].imageID})'
}

# agent_cid / agent_pid: the agent container (containerd's ID) and its process (a host PID).
agent_cid() { pf_crictl ps -q --state running --name '^agent$' --label "io.kubernetes.pod.name=$AGENT_POD" | head -n1; }
agent_pid() { pf_crictl inspect -o go-template --template '{{.info.pid}}' "$(agent_cid)"; }

# agent_token: the running pod's projected ServiceAccount token, as the agent reads it.
agent_token() {
	kc exec -n "$PF_NS" "$AGENT_POD" -c agent -- cat /var/run/secrets/kubernetes.io/serviceaccount/token
}

# agent_select_pools POOLS: an operator's relabel: node label podfence-e2e/pools=POOLS, and the
# agent started again to take it (a pool config is chosen at start when containers hold CPUs).
# The one place that knows how the agent learns its labels: while deploy/'s DaemonSet names
# them in PODFENCE_NODE_LABEL, the overlay's value changes too and the apply rolls the pod;
# else the pod is deleted and the DaemonSet makes a new one. Sets AGENT_OFF (the log offset).
agent_select_pools() {
	local old=$AGENT_UID how out
	AGENT_OFF=$(log_lines)
	kc label node "$NODE" "podfence-e2e/pools=$1" --overwrite >/dev/null
	if label_env_shipped; then
		# shellcheck disable=SC2034 # overlay_write's
		OVERLAY_POOLS=$1
		overlay_write
		how="PODFENCE_NODE_LABEL in the overlay, applied (a rollout)"
		out=$(kc apply -k "$OVERLAY" 2>&1) || how+=" failed: $(tr '\n' ' ' <<<"$out")"
	else
		how="agent pod deleted"
		out=$(kc delete pod -n "$PF_NS" "$AGENT_POD" --wait=false 2>&1) || how+=" failed: $out"
	fi
	if agent_wait "$old" "$AGENT_OFF"; then
		pass "relabel: node $NODE podfence-e2e/pools=$1, the agent replaced" "$how; pod $AGENT_POD (was uid ${old:0:8}, now ${AGENT_UID:0:8})"
	else
		fail "relabel: node $NODE podfence-e2e/pools=$1, the agent replaced" "$how; $AGENT_WAIT_ERR"
		return 1
	fi
}
