# shellcheck shell=bash
# Proof: kube-scheduler with the podfence extender places pods by core-scheduling support.
# `podfence extender` (its debug log: one msg=filter / msg=prioritize line per call) and a
# second kube-scheduler, podfence-scheduler (as deploy/extender names it), with it as a
# non-ignorable extender; these pods have no nodeName and name that scheduler. An
# implicit pod passes the filter and runs on the node; a core-sched-group pod stays Pending
# (the node is podfence.io/core-sched=unsupported); with a fake Node fake-smt
# (core-sched=supported) the extender is asked to prioritize and the group pod is bound there.
# The run's default-scheduler leaves them alone; the pods of the other checks name their node,
# or a scheduler nobody runs (pod_yaml). Sourced by run.sh after facts.sh and pods.sh.
# shellcheck disable=SC2153 # NODE is run.sh's

EXT_LOG=$RUN/extender.log
ext_lines() { if [[ -f $EXT_LOG ]]; then wc -l <"$EXT_LOG"; else echo 0; fi; }
# ext_wait OFFSET ERE [SECONDS]: waits for an extender log line after OFFSET that matches
# ERE; prints it (without time and level).
ext_wait() {
	local n=$((${3:-15} * 5)) line
	for ((i = 0; i < n; i++)); do
		line=$(tail -n "+$(($1 + 1))" "$EXT_LOG" 2>/dev/null | grep -aE -- "$2" | head -n1)
		if [[ -n $line ]]; then
			printf '%s\n' "${line#* level=DEBUG }"
			return 0
		fi
		sleep 0.2
	done
	return 1
}
ext_tail() { tail -n "+$(($1 + 1))" "$EXT_LOG" 2>/dev/null | tail -n 4 | tr '\n' '|'; }

# scheduler_start: the extender (as the admin: it lists and watches pods and nodes), then
# kube-scheduler (profile podfence-scheduler) with no serving port and no leader election.
SCHED_LOG=$RUN/pf-scheduler.log
scheduler_start() {
	bg_start extender "$RUN/podfence-extender" --listen "127.0.0.1:$EXTENDER_PORT" \
		--kubeconfig "$RUN/admin.kubeconfig" --log-level debug
	wait_until 30 curl -sf "http://127.0.0.1:$EXTENDER_PORT/healthz" || return 1
	cat >"$RUN/pf-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$RUN/admin.kubeconfig"}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: podfence-scheduler
extenders:
- urlPrefix: http://127.0.0.1:$EXTENDER_PORT
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: 5s
EOF
	bg_start pf-scheduler kube-scheduler --config "$RUN/pf-scheduler.yaml" --secure-port 0 --v 2
	sleep 1
	bg_running pf-scheduler
}

# sched_pod NAME [LABELS]: a pod without nodeName, for podfence-scheduler.
sched_pod() { POD_SCHEDULER=podfence-scheduler apply "$1" "" "{}" "${2:-}"; }
test_bound() { [[ -n $(pod_get "$1" '{.spec.nodeName}') ]]; }
# sched_event NAME: the message of the pod's last FailedScheduling Event.
sched_event() {
	kc get events -n "$NS" --field-selector "involvedObject.name=$1,reason=FailedScheduling" -o json 2>/dev/null |
		jq -r '[.items[] | .message // ""] | last // ""'
}
test_sched_event() { [[ -n $(sched_event "$1") ]]; }
# force_delete NAME...: a pod bound to a node without a kubelet never finishes terminating.
force_delete() { kc delete pod -n "$NS" "$@" --force --grace-period=0 --wait=false >/dev/null 2>&1 || true; }
test_no_pods() {
	local n
	for n in "$@"; do [[ -z $(pod_get "$n" '{.metadata.name}') ]] || return 1; done
}

prove_scheduler_extender() {
	local off line node ev lf lp what
	if ! scheduler_start; then
		fail "scheduler: kube-scheduler and podfence extender start" "extender $(bg_running extender && echo running || echo exited), podfence-scheduler $(bg_running pf-scheduler && echo running || echo exited): $(tail -n 3 "$RUN/extender.log" "$SCHED_LOG" 2>/dev/null | tr '\n' '|')"
		return 0
	fi
	pass "scheduler: kube-scheduler $(kube-scheduler --version | awk '{print $2}') runs as podfence-scheduler with the podfence extender" \
		"node $NODE Ready=$(node_ready "$NODE"); extender on 127.0.0.1:$EXTENDER_PORT (/healthz ok, $(grep -ao 'msg="informers synced".*' "$EXT_LOG" | head -n1)); filterVerb+prioritizeVerb, nodeCacheCapable, not ignorable"

	# An implicit pod (no core-scheduling label): the filter passes the node, the pod runs.
	what="scheduler: an implicit pod passes the extender's filter, is bound to $NODE and runs"
	off=$(ext_lines)
	if sched_pod sched-implicit && wait_until 30 test_bound sched-implicit; then
		node=$(pod_get sched-implicit '{.spec.nodeName}')
		line=$(ext_wait "$off" "msg=filter pod=$NS/sched-implicit .*refused=0" 10) || line=""
		if [[ -n $line && $node == "$NODE" ]] && wait_running sched-implicit; then
			pass "$what" "nodeName=$node, running; extender: $line"
		else
			fail "$what" "nodeName=$node; filter line: ${line:-<none>} (log since: $(ext_tail "$off")); ${LAUNCH_ERR[sched-implicit]:-}"
		fi
	else
		fail "$what" "not bound within 30s ($APPLY_OUT); FailedScheduling: $(sched_event sched-implicit); scheduler log: $(tail -n 3 "$SCHED_LOG" | tr '\n' '|')"
	fi
	delete_pods sched-implicit

	# An explicit group, and the node says podfence.io/core-sched=unsupported: refused.
	what="scheduler: a core-sched-group pod stays Pending, refused by the extender's filter"
	off=$(ext_lines)
	if sched_pod sched-explicit '{podfence.io/core-sched-group: e2e-group}'; then
		wait_until 30 test_sched_event sched-explicit || true
		ev=$(sched_event sched-explicit)
		line=$(ext_wait "$off" "msg=filter pod=$NS/sched-explicit .*refused=1" 5) || line=""
		if [[ $(pod_get sched-explicit '{.status.phase}') == Pending && -z $(pod_get sched-explicit '{.spec.nodeName}') && -n $line &&
			$ev == *"podfence: pod asks for core-scheduling group"*"podfence.io/core-sched=unsupported"* ]]; then
			pass "$what" "FailedScheduling: $ev; extender: $line"
		else
			fail "$what" "phase=$(pod_get sched-explicit '{.status.phase}') nodeName=$(pod_get sched-explicit '{.spec.nodeName}'); FailedScheduling: ${ev:-<none>}; filter line: ${line:-<none>}"
		fi
	else
		fail "$what" "kubectl apply failed: $APPLY_OUT"
	fi
	delete_pods sched-explicit

	# kube-scheduler skips scoring when one node is feasible: a second, fake Node that claims
	# core scheduling (4 physical cores, 8 CPUs). No kubelet: what lands there never runs.
	kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: fake-smt
  labels: {podfence.io/core-sched: supported, kubernetes.io/hostname: fake-smt}
  annotations: {podfence.io/physical-cores: "4"}
EOF
	kc patch node fake-smt --subresource=status --type=merge -p '{"status":{
		"capacity":{"cpu":"8","memory":"8Gi","pods":"10"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"10"},
		"conditions":[{"type":"Ready","status":"True","reason":"E2EFake","message":"fake node of the node e2e"}]}}' >/dev/null ||
		pf_log "warning: status patch of node fake-smt failed"
	untaint fake-smt
	sleep 2 # the scheduler's and the extender's informers see the node

	what="scheduler: two feasible nodes: the extender is asked to filter and to prioritize"
	off=$(ext_lines)
	if sched_pod sched-implicit-2 && wait_until 30 test_bound sched-implicit-2; then
		lf=$(ext_wait "$off" "msg=filter pod=$NS/sched-implicit-2 .*nodes=2 refused=0" 5) || lf=""
		lp=$(ext_wait "$off" "msg=prioritize pod=$NS/sched-implicit-2 .*nodes=2" 5) || lp=""
		if [[ -n $lf && -n $lp ]]; then
			pass "$what" "bound to $(pod_get sched-implicit-2 '{.spec.nodeName}'); extender: $lf; $lp"
		else
			fail "$what" "filter: ${lf:-<none>}; prioritize: ${lp:-<none>}; extender log since: $(ext_tail "$off")"
		fi
	else
		fail "$what" "not bound within 30s ($APPLY_OUT); FailedScheduling: $(sched_event sched-implicit-2)"
	fi
	force_delete sched-implicit-2

	what="scheduler: a core-sched-group pod is bound to the node with core scheduling (fake-smt)"
	off=$(ext_lines)
	if sched_pod sched-explicit-2 '{podfence.io/core-sched-group: e2e-group}'; then
		wait_until 30 test_bound sched-explicit-2 || true
		node=$(pod_get sched-explicit-2 '{.spec.nodeName}')
		line=$(ext_wait "$off" "msg=filter pod=$NS/sched-explicit-2 .*nodes=2 refused=1" 5) || line=""
		if [[ $node == fake-smt && -n $line ]]; then
			pass "$what" "nodeName=$node; extender: $line"
		else
			fail "$what" "nodeName=${node:-<none>}; filter line: ${line:-<none>}; FailedScheduling: $(sched_event sched-explicit-2)"
		fi
	else
		fail "$what" "kubectl apply failed: $APPLY_OUT"
	fi
	force_delete sched-explicit-2
	kc delete node fake-smt --wait=true --timeout=30s >/dev/null 2>&1 || pf_log "warning: kubectl delete node fake-smt did not finish"
	wait_until 20 test_no_pods sched-implicit-2 sched-explicit-2 || true
	if ! kc get node fake-smt >/dev/null 2>&1 && test_no_pods sched-implicit-2 sched-explicit-2; then
		pass "scheduler: fake node and the pods bound to it deleted" "nodes: $(kc get nodes -o jsonpath='{.items[*].metadata.name}'); pods in $NS: $(kc get pods -n "$NS" -o name | grep -c .)"
	else
		fail "scheduler: fake node and the pods bound to it deleted" "nodes: $(kc get nodes -o jsonpath='{.items[*].metadata.name}'); pods: $(kc get pods -n "$NS" -o name | tr '\n' ' ')"
	fi
	if grep -qaE '^E[0-9]{4} ' "$SCHED_LOG"; then
		pf_log "podfence-scheduler logged errors: $(grep -aE '^E[0-9]{4} ' "$SCHED_LOG" | tail -n 3 | cut -c1-300 | tr '\n' '|')"
	fi
	bg_stop pf-scheduler 10
	bg_stop extender 10
}

# untaint NODE: removes the not-ready NoSchedule taint (admission puts it on a new Node; the
# node lifecycle controller lifts it only once it sees the fake node Ready).
untaint() {
	if kc get node "$1" -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready; then
		kc taint node "$1" node.kubernetes.io/not-ready:NoSchedule- >/dev/null || pf_log "warning: could not untaint node $1"
	fi
}
# node_ready NODE: its Ready condition, "status (reason: message)".
node_ready() { kc get node "$1" -o json | jq -r '.status.conditions[]? | select(.type == "Ready") | "\(.status) (\(.reason): \(.message | .[:80]))"'; }
