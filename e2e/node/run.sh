#!/usr/bin/env bash
# `make e2e-node`: podfence on a real one-node Kubernetes, end to end. Needs root.
#
#   1. tools, cached: containerd/runc/crictl (e2e/tools.sh), kube-apiserver + kubelet v1.31 and
#      etcd + kubectl (e2e/node/k8s.sh), a static podfence;
#   2. etcd and kube-apiserver on loopback (token auth, Node+RBAC, service-account keys), the
#      `default` ServiceAccount made by hand (no controller-manager; no scheduler until phase
#      C: pods name their node and do not mount a token);
#   3. deploy/ through `kubectl apply -k` (server dry run of every object, then for real with
#      the webhook configurations pointed at the local webhook by url: no Service routing
#      here), the webhook's certificate from hack/certs.sh;
#   4. containerd with NRI (e2e/containerd.sh), `podfence webhook` (HTTPS on loopback),
#      `podfence agent` (NRI plugin + device plugin in the kubelet's device-plugin dir), and a
#      kubelet (cgroupfs, cgroup v1, cpuManagerPolicy none, the pooled CPU reserved);
#   5. pods through `kubectl apply`, checked on the stored pod (the webhook's mutation), the
#      node (device-plugin capacity), the kubelet's pod-resources API (allocated devices), the
#      runtime (the exclusive-cpus annotation), the kernel (cgroup cpuset, CFS quota,
#      affinity) and `kubectl exec env`. Pools fitted to this machine: the highest online CPU
#      X makes the pool, the others the default pool; phase A exclusive_a=X, phase B
#      shared_s=X, the agent restarted in between on the other node label (one ConfigMap-like
#      pool dir with both configs, each with its nodeSelector, read by agent and webhook).
#      The EPC limit and the core-scheduling group are checked on the stored pod only: this
#      host has no SGX and no core scheduling, so that pod is never bound to the node.
#      Phase C, last: `podfence extender` and kube-scheduler configured with it (filter +
#      prioritize, not ignorable); unnamed-node pods: an implicit one runs on the node, a
#      core-sched-group one stays Pending (FailedScheduling with the extender's reason: the node
#      is core-sched=unsupported); with a fake Node fake-smt (core-sched=supported) the extender
#      is asked to prioritize and the group pod is bound there; fake node and pods deleted.
#
# Output: one `PASS <what>: <facts>` / `FAIL <what>: <why>` line per check on stdout, progress
# on stderr, last `e2e-node: N passed, M failed`. Exit 1 on any failure (with log tails).
# Everything started is stopped and removed on exit, and the host sysctls the kubelet
# changes are restored, also after a failure or ^C.
#
# Environment: as e2e/lib.sh and e2e/node/lib.sh, with its own defaults:
#   PODFENCE_E2E_WORK=/tmp/pf-e2e-node, PODFENCE_E2E_CGROUP_PARENT=/podfence-e2e-node
#   PODFENCE_E2E_NODE_PORTS="etcd apiserver kubelet kubelet-healthz webhook metrics extender"
#     (default "22379 26443 20250 20248 28443 29464 28888"; etcd also uses the next port)
#   PODFENCE_E2E_KEEP=1 keeps the run dir (logs, configs, PKI) for a post-mortem.
set -euo pipefail
[ "$(id -u)" = 0 ] || {
	echo "e2e-node needs root (it runs containerd and a kubelet, creates cgroups and mounts)"
	exit 1
}
export PODFENCE_E2E_WORK=${PODFENCE_E2E_WORK:-/tmp/pf-e2e-node}
export PODFENCE_E2E_CGROUP_PARENT=${PODFENCE_E2E_CGROUP_PARENT:-/podfence-e2e-node}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../checks.sh"
. "$(dirname "$0")/cluster.sh"
REPO=$(cd "$PF_E2E_DIR/.." && pwd)

# One node e2e per machine: the ports, the device-plugin mount point and the cgroup root are
# shared. A second run waits (fd 9 is closed for every child, see bg_start).
LOCK=/run/lock/podfence-e2e-node.lock
[[ -d /run/lock ]] || LOCK=/tmp/podfence-e2e-node.lock
exec 9>"$LOCK"
if ! flock -n 9; then
	pf_log "another e2e-node run is going on; waiting for it (lock $LOCK)"
	flock -w 1200 9 || pf_die "still locked after 20 min: $LOCK"
fi

# The script's stdout and stderr, for on_exit (children started here close 7 and 8).
exec 7>&1 8>&2
# recover_stale: what a run killed without its clean-up (SIGKILL, power loss) left: its
# processes (they name their run dir), host sysctls (from its sysctl.saved), containerd.
# Holding the lock, every run dir without a .finished mark is such a leftover.
recover_stale() {
	local d f pid k v exe
	for d in /tmp/pf-e2e-node-run.*; do
		[[ -d $d && $d != "$RUN" && ! -e $d/.finished ]] || continue
		pf_log "recovering after an interrupted run: $d"
		while read -r f; do
			pid=${f#/proc/} pid=${pid%/cmdline}
			exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
			case $exe in
			"$d"/* | "$PFN_BIN"/* | "$PF_BIN"/*)
				kill -KILL "$pid" 2>/dev/null && pf_log "killed leftover $exe (pid $pid)"
				;;
			esac
		done < <(grep -lsaF -- "$d/" /proc/[0-9]*/cmdline)
		if [[ -f $d/sysctl.saved ]]; then
			while IFS='=' read -r k v; do
				[[ $(sysctl -n "$k") == "$v" ]] || sysctl -qw "$k=$v" || true
			done <"$d/sysctl.saved"
		fi
		if "$PF_E2E_DIR/containerd.sh" status 7>&- 8>&- 9>&-; then
			"$PF_E2E_DIR/containerd.sh" stop 7>&- 8>&- 9>&- >&2 || true
		fi
		if [[ -f $d/created-dirs ]]; then
			while read -r f; do rmdir "$f" 2>/dev/null || true; done <"$d/created-dirs"
		fi
		rm -rf "$d"
	done
	return 0
}

T0=$(pf_now_ms)
NODE=localhost # the apiserver reaches the kubelet by its Hostname address: loopback only
NS=pf-e2e-node
read -r ETCD_PORT API_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT WEBHOOK_PORT METRICS_PORT EXTENDER_PORT \
	<<<"${PODFENCE_E2E_NODE_PORTS:-22379 26443 20250 20248 28443 29464 28888}"
EXTENDER_PORT=${EXTENDER_PORT:-28888}
RUN=$(mktemp -d /tmp/pf-e2e-node-run.XXXXXX)
AGENT_LOG=$RUN/agent.log
DP_DIR=$RUN/device-plugins # the kubelet's /var/lib/kubelet/device-plugins (see cluster.sh)
started=0 finished=0
declare -A TIMES=()

step() { pf_log "== $*"; }
# timed NAME CMD...: runs CMD and records its duration under NAME for the summary.
timed() {
	local name=$1 t rc=0
	shift
	t=$(pf_now_ms)
	"$@" || rc=$?
	TIMES[$name]=$(pf_elapsed "$t")
	return "$rc"
}

# --- the agent and the webhook --------------------------------------------------------------

# agent_start PHASE: the agent on the NRI socket, advertising its pools in DP_DIR, with node
# label podfence-e2e/phase=PHASE (which selects poolconfig-PHASE.yaml); waits for Synchronize.
agent_start() {
	AGENT_OFF=$(log_lines)
	"$RUN/podfence" agent --nri-socket "$PODFENCE_E2E_NRI_SOCKET" --pools "$RUN/pools" \
		--node-name "$NODE" --node-label "podfence-e2e/phase=$1" --checkpoint-dir "$RUN/checkpoint" \
		--start-binary "$RUN/podfence" --device-plugin-dir "$DP_DIR" --resource-domain podfence.io \
		--metrics-address "127.0.0.1:$METRICS_PORT" --kubeconfig "$RUN/agent.kubeconfig" </dev/null >>"$AGENT_LOG" 2>&1 7>&- 8>&- 9>&- &
	BG_PID[agent]=$!
	if ! wait_log "$AGENT_OFF" 'msg=synchronized' 30 >/dev/null; then
		fail "agent start (phase $1)" "no msg=synchronized within 30s; agent $(bg_running agent && echo running || echo exited)"
		return 1
	fi
	pf_log "agent up (pid ${BG_PID[agent]}, phase $1)"
}
agent_stop() { bg_stop agent 10; }

webhook_start() {
	bg_start webhook "$RUN/podfence" webhook --listen "127.0.0.1:$WEBHOOK_PORT" \
		--tls-cert "$RUN/deploy/certs/tls.crt" --tls-key "$RUN/deploy/certs/tls.key" \
		--pools "$RUN/pools" --coresched-profiles "$RUN/profiles.yaml" --reload-interval 2s
	wait_until 20 curl -sf --cacert "$RUN/deploy/certs/ca.crt" "https://127.0.0.1:$WEBHOOK_PORT/healthz"
}

# --- pods ---------------------------------------------------------------------------------

# pod_yaml NAME NODE LIMITS [LABELS [NAMESPACE [ANNOTATIONS]]]: a busybox `sleep` pod on the
# host network (no CNI here), with no API token; LIMITS, LABELS and ANNOTATIONS are YAML
# flow maps; NODE empty: never bound.
pod_yaml() {
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: ${5:-$NS}
  labels: ${4:-{\}}
  annotations: ${6:-{\}}
spec:
  ${2:+nodeName: $2}
  hostNetwork: true
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 2
  containers:
    - name: app
      image: $PF_BUSYBOX_IMAGE
      imagePullPolicy: Never
      command: [/bin/sleep, "86400"]
      resources:
        limits: ${3:-{\}}
EOF
}

# apply NAME NODE LIMITS [LABELS [NAMESPACE [ANNOTATIONS]]]: kubectl apply of pod_yaml;
# APPLY_OUT holds kubectl's output.
APPLY_OUT=""
apply() {
	mkdir -p "$RUN/pods"
	pod_yaml "$@" >"$RUN/pods/$1.yaml"
	APPLY_OUT=$(kc apply -f "$RUN/pods/$1.yaml" 2>&1)
}

# pod_get NAME JSONPATH
pod_get() { kc get pod -n "$NS" "$1" -o jsonpath="$2" 2>/dev/null; }

# wait_running NAME: waits (60 s) for container app to run; sets CID[NAME] for checks.sh.
wait_running() {
	local cid
	unset "CID[$1]"
	if ! wait_until 60 test_running "$1"; then
		LAUNCH_ERR[$1]="not running after 60s: phase $(pod_get "$1" '{.status.phase}') $(pod_get "$1" '{.status.reason} {.status.message} {.status.containerStatuses[0].state}')"
		return 1
	fi
	cid=$(pod_get "$1" '{.status.containerStatuses[0].containerID}')
	CID[$1]=${cid#containerd://}
}
test_running() { [[ -n $(pod_get "$1" '{.status.containerStatuses[0].state.running.startedAt}') ]]; }

# launch_pod WHAT NAME NODE LIMITS [LABELS]: apply + wait_running; a FAIL line if either fails.
launch_pod() {
	local what=$1
	shift
	if ! apply "$@"; then
		fail "$what" "kubectl apply failed: $APPLY_OUT"
		return 1
	fi
	wait_running "$1" || {
		fail "$what" "${LAUNCH_ERR[$1]}"
		return 1
	}
}

# delete_pods NAME...: kubectl delete, waiting until the kubelet has removed them.
delete_pods() {
	kc delete pod -n "$NS" "$@" --wait=true --timeout=90s >/dev/null 2>&1 || pf_log "warning: kubectl delete pod $* did not finish"
	local n
	for n in "$@"; do unset "CID[$n]"; done
}

# --- facts --------------------------------------------------------------------------------

# expect_eq WHAT GOT WANT [FACT]: PASS when equal.
expect_eq() {
	if [[ $2 == "$3" ]]; then
		pass "$1" "${4:-value}=$2"
	else
		fail "$1" "${4:-value}=$2 (want $3)"
	fi
}

# expect_env WHAT NAME VAR=VALUE...: the container's env through `kubectl exec` (API server →
# kubelet → containerd's streaming server); "<unset>" for an absent variable.
expect_env() {
	local what=$1 name=$2 kv var want got out facts="" bad=""
	shift 2
	if ! out=$(kc exec -n "$NS" "$name" -c app -- env 2>&1); then
		fail "$what" "kubectl exec $name -- env failed: $(tr '\n' ' ' <<<"$out")"
		return 0
	fi
	for kv in "$@"; do
		var=${kv%%=*} want=${kv#*=}
		got=$(awk -v k="$var" 'index($0, k "=") == 1 {print substr($0, length(k) + 2); f = 1} END {if (!f) print "<unset>"}' <<<"$out")
		facts+="${facts:+ }$var=$got"
		[[ $got == "$want" ]] || bad+="${bad:+; }$var=$got (want $var=$want)"
	done
	if [[ -z $bad ]]; then pass "$what" "kubectl exec env: $facts"; else fail "$what" "kubectl exec env: $bad"; fi
}

# podres: the kubelet's pod-resources API as JSON (see tools/k8s/podresources).
podres() { pf-podresources -socket "$RUN/kubelet/pod-resources/kubelet.sock"; }

# allocated RESOURCE [POD]: device IDs the kubelet has allocated (pod-resources List), sorted,
# comma-separated; of POD only if given.
allocated() {
	podres | jq -r --arg r "$1" --arg p "${2:-}" --arg ns "$NS" \
		'[.pods[] | select($p == "" or (.name == $p and .namespace == $ns)) | .containers[].devices[]
		  | select(.resource == $r) | .ids[]] | sort_by(tonumber? // .) | join(",")'
}
test_allocated_ids() { [[ $(allocated "$1" "$2") == "$3" ]]; }
# allocated_count RESOURCE: how many devices of RESOURCE the kubelet has allocated.
allocated_count() { podres | jq --arg r "$1" '[.pods[].containers[].devices[] | select(.resource == $r) | .ids[]] | length'; }

# requested RESOURCE: the sum of RESOURCE limits of the pods bound to the node that are not
# terminated, as `kubectl describe node` (and the scheduler) count "Allocated resources".
requested() {
	kc get pods -A -o json | jq --arg r "$1" --arg n "$NODE" '[.items[]
	  | select(.spec.nodeName == $n and .status.phase != "Succeeded" and .status.phase != "Failed")
	  | .spec.containers[].resources.limits[$r] // "0" | tonumber] | add // 0'
}

# node_res FIELD RESOURCE: the node's status.FIELD (capacity, allocatable) of RESOURCE.
node_res() { qty "$(kc get node "$NODE" -o json | jq -r --arg f "$1" --arg r "$2" '.status[$f][$r] // "<none>"')"; }

# wait_node_res FIELD RESOURCE WANT [SECONDS]: waits until node_res says WANT.
wait_node_res() { wait_until "${4:-30}" test_node_res "$1" "$2" "$3"; }
test_node_res() { [[ $(node_res "$1" "$2") == "$3" ]]; }

# qty QUANTITY: a whole-number quantity as a plain number ("1k" -> 1000), else as is.
qty() {
	case $1 in
	*k) [[ ${1%k} =~ ^[0-9]+$ ]] && echo $((${1%k} * 1000)) || echo "$1" ;;
	*M) [[ ${1%M} =~ ^[0-9]+$ ]] && echo $((${1%M} * 1000000)) || echo "$1" ;;
	*) echo "$1" ;;
	esac
}

# expect_capacity WHAT RESOURCE CAPACITY ALLOCATABLE
expect_capacity() {
	wait_node_res allocatable "$2" "$4" 30 || true
	local c a
	c=$(node_res capacity "$2") a=$(node_res allocatable "$2")
	if [[ $c == "$3" && $a == "$4" ]]; then
		pass "$1" "node $NODE capacity $2=$c allocatable $2=$a"
	else
		fail "$1" "node $NODE capacity $2=$c allocatable $2=$a (want $3 and $4)"
	fi
}

# expect_allocated WHAT RESOURCE COUNT: the kubelet's allocated devices (pod-resources) and the
# limits of the node's live pods both count COUNT.
expect_allocated() {
	local got req
	wait_until 20 test_allocated "$2" "$3" || true
	got=$(allocated_count "$2" 2>&1) req=$(requested "$2" 2>&1)
	if [[ $got == "$3" && $req == "$3" ]]; then
		pass "$1" "kubelet pod-resources: $got $2 devices allocated; live pods' limits: $req"
	else
		fail "$1" "kubelet pod-resources: $got $2 devices allocated; live pods' limits: $req (want $3)"
	fi
}
test_allocated() { [[ $(allocated_count "$1") == "$2" && $(requested "$1") == "$2" ]]; }

# expect_stored WHAT NAME KEY=VALUE...: annotations (a:KEY) and labels (l:KEY) of the stored
# pod, as the webhook left them; VALUE "<none>" for an absent one.
expect_stored() {
	local what=$1 name=$2 kv key want got json facts="" bad=""
	shift 2
	json=$(kc get pod -n "$NS" "$name" -o json 2>&1) || {
		fail "$what" "kubectl get pod $name: $json"
		return 0
	}
	for kv in "$@"; do
		key=${kv%%=*} want=${kv#*=}
		case $key in
		a:*) got=$(jq -r --arg k "${key#a:}" '.metadata.annotations[$k] // "<none>"' <<<"$json") ;;
		l:*) got=$(jq -r --arg k "${key#l:}" '.metadata.labels[$k] // "<none>"' <<<"$json") ;;
		esac
		facts+="${facts:+ }${key#?:}=$got"
		[[ $got == "$want" ]] || bad+="${bad:+; }${key#?:}=$got (want $want)"
	done
	if [[ -z $bad ]]; then pass "$what" "stored pod: $facts"; else fail "$what" "stored pod: $bad"; fi
}

# expect_refused_apply WHAT NAME ERE LIMITS: kubectl apply must fail with a message matching ERE.
expect_refused_apply() {
	if apply "$2" "$NODE" "$4"; then
		fail "$1" "kubectl apply succeeded; want it refused matching /$3/"
		delete_pods "$2"
	elif grep -qE -- "$3" <<<"$APPLY_OUT"; then
		pass "$1" "kubectl apply: $(tr '\n' ' ' <<<"$APPLY_OUT" | sed 's/^Error from server: //; s/ *$//')"
	else
		fail "$1" "kubectl apply failed without /$3/: $APPLY_OUT"
	fi
}

# expect_admission_refused WHAT NAME RESOURCE: the pod is stored but the kubelet refuses it
# at admission (not enough RESOURCE left): phase Failed with a reason naming the resource.
expect_admission_refused() {
	local phase reason msg
	wait_until 30 test_phase "$2" Failed || true
	phase=$(pod_get "$2" '{.status.phase}') reason=$(pod_get "$2" '{.status.reason}') msg=$(pod_get "$2" '{.status.message}')
	if [[ $phase == Failed && "$reason $msg" == *"$3"* ]]; then
		pass "$1" "phase=$phase reason=$reason message=\"$msg\""
	else
		fail "$1" "phase=$phase reason=$reason message=\"$msg\" (want Failed naming $3)"
	fi
}
test_phase() { [[ $(pod_get "$1" '{.status.phase}') == "$2" ]]; }

# runtime_annotation NAME KEY: the container's annotation as containerd holds it (from the
# kubelet's CreateContainer, with the device plugin's Allocate annotations).
runtime_annotation() {
	pf_crictl inspect "${CID[$1]}" 2>/dev/null | jq -r --arg k "$2" '.status.annotations[$k] // .info.config.annotations[$k] // "<none>"'
}

# whole_cores CPULIST: "yes" if every SMT sibling of each CPU is in CPULIST too.
whole_cores() {
	local c s
	for c in $(cpulist_expand "$1"); do
		s=$(cat "/sys/devices/system/cpu/cpu$c/topology/thread_siblings_list")
		for s in $(cpulist_expand "$s"); do
			cpulist_expand "$1" | grep -qx "$s" || {
				echo "no (CPU $c's sibling $s is not allocated)"
				return 0
			}
		done
	done
	echo yes
}

# expect_node_info: the agent labelled and annotated its Node (through deploy/'s RBAC): core
# scheduling support, and the physical cores (SMT siblings once) as sysfs counts them.
expect_node_info() {
	local want label cores
	want=$(cat /sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list | sort -u | grep -c .)
	wait_until 30 test_node_info || true
	label=$(kc get node "$NODE" -o json | jq -r '.metadata.labels["podfence.io/core-sched"] // "<none>"')
	cores=$(kc get node "$NODE" -o json | jq -r '.metadata.annotations["podfence.io/physical-cores"] // "<none>"')
	if [[ $label =~ ^(un)?supported$ && $cores == "$want" ]]; then
		pass "agent: node info published with deploy/'s RBAC" "node $NODE label podfence.io/core-sched=$label, annotation podfence.io/physical-cores=$cores"
	else
		fail "agent: node info published with deploy/'s RBAC" "label podfence.io/core-sched=$label (want supported|unsupported), annotation podfence.io/physical-cores=$cores (want $want); agent: $(grep -a 'node info' "$AGENT_LOG" | tail -n 1)"
	fi
}
test_node_info() { [[ $(kc get node "$NODE" -o jsonpath='{.metadata.annotations.podfence\.io/physical-cores}') != "" ]]; }

# expect_refusal_event WHAT NAME: pod NAME (namespace podfence-system) gets a Warning Event
# from the agent, and its container waits in CreateContainerError naming the annotation.
expect_refusal_event() {
	local ev state
	wait_until 45 test_event "$2" || true
	ev=$(kc get events -n podfence-system --field-selector "involvedObject.name=$2" -o json |
		jq -r '[.items[] | select(.type == "Warning" and ((.source.component // "") + (.reportingComponent // "") | test("podfence")))
		  | "\(.reason): \(.message)"] | first // ""')
	state=$(kc get pod -n podfence-system "$2" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}' 2>/dev/null)
	if [[ -n $ev && $ev == *podfence.io/cpu-pools* && $state == CreateContainerError ]]; then
		pass "$1" "container waiting=$state; Event $ev"
	else
		fail "$1" "container waiting=${state:-<none>} (want CreateContainerError); Event from podfence: ${ev:-<none>}"
	fi
}
test_event() {
	kc get events -n podfence-system --field-selector "involvedObject.name=$1" -o json |
		jq -e '[.items[] | select(.type == "Warning" and ((.source.component // "") + (.reportingComponent // "") | test("podfence")))] | length > 0' &&
		[[ $(kc get pod -n podfence-system "$1" -o jsonpath='{.status.containerStatuses[0].state.waiting.reason}') == CreateContainerError ]]
}

# --- clean-up and summary -----------------------------------------------------------------

# leftovers: anything this run could leave behind, one line each (empty: nothing).
leftovers() {
	local d
	pf_containerd_running && echo "containerd $(cat "$PF_CONTAINERD_PID")"
	orphan_containerd | sed 's/^/containerd /'
	grep -lsF -- "$PF_CONTAINERD_SOCK" /proc/[0-9]*/cmdline | xargs -r grep -lsa containerd-shim | sed 's/^/shim /'
	find /proc/[0-9]*/exe -maxdepth 0 \( -lname "$RUN/*" -o -lname "$PFN_BIN/*" \) 2>/dev/null | sed 's/^/process /'
	awk -v w="$PF_WORK" -v r="$RUN" 'index($5, w "/") == 1 || $5 == w || index($5, r "/") == 1 || $5 == "'"$HOST_DP_DIR"'" {print "mount " $5}' /proc/self/mountinfo
	for d in /sys/fs/cgroup/*"$PF_CGROUP_PARENT"; do
		[[ -e $d ]] && echo "cgroup $d"
	done
	for d in ${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"}; do
		[[ -e $d ]] && echo "dir $d"
	done
	[[ -z $(sysctls_changed) ]] || echo "sysctls $(sysctls_changed)"
	return 0
}

on_exit() {
	local rc=$? left changed f
	trap - EXIT INT TERM
	# A signal may arrive while a command with redirections runs in this shell (a function
	# called as `f >/dev/null`): the trap then inherits them. Back to the script's own.
	exec 1>&7 2>&8
	((finished)) || fail "run" "aborted before the end (exit $rc); see the log tails"
	if ((FAILED > 0 || rc != 0)); then
		for f in agent webhook kubelet kube-apiserver kube-scheduler extender; do
			[[ -s $RUN/$f.log ]] || continue
			echo "---- last 25 lines of $RUN/$f.log ----" >&2
			tail -n 25 "$RUN/$f.log" >&2
		done
		pf_log_tail 25
	fi
	step "clean-up"
	bg_stop kube-scheduler 10
	bg_stop extender 10
	bg_stop kubelet 15
	agent_stop
	if ((started)); then "$PF_E2E_DIR/containerd.sh" stop 7>&- 8>&- 9>&- >&2 || true; fi
	bg_stop webhook 5
	bg_stop kube-apiserver 15
	bg_stop etcd 10
	changed=$(sysctls_changed)
	sysctls_restore
	host_dirs_remove
	mkdir -p "$PF_WORK"
	for f in agent webhook kubelet kube-apiserver etcd kube-scheduler extender; do
		[[ -f $RUN/$f.log ]] && cp "$RUN/$f.log" "$PF_WORK/$f.log"
	done
	if [[ ${PODFENCE_E2E_KEEP:-0} != 1 ]]; then rm -rf "$RUN"; else touch "$RUN/.finished"; fi
	if ((${#SYSCTL_SAVED[@]})); then
		if [[ -z $(sysctls_changed) ]]; then
			pass "host sysctls restored" "the kubelet had changed: ${changed:-nothing}; now $(for k in "${KUBELET_SYSCTLS[@]}"; do printf '%s=%s ' "$k" "$(sysctl -n "$k")"; done | sed 's/ $//')"
		else
			fail "host sysctls restored" "still changed: $(sysctls_changed)"
		fi
	fi
	left=$(leftovers)
	if [[ -z $left ]]; then
		pass "clean-up" "no process, mount under $PF_WORK or the run dir, cgroup $PF_CGROUP_PARENT or host dir left"
	else
		fail "clean-up" "left behind: $(tr '\n' ';' <<<"$left")"
	fi
	local times="" k
	for k in tools control-plane deploy containerd kubelet phase-a phase-b scheduler; do
		[[ -n ${TIMES[$k]:-} ]] && times+=" $k=${TIMES[$k]}s"
	done
	pf_log "e2e-node finished in $(pf_elapsed "$T0")s ($times ); logs in $PF_WORK"
	echo "e2e-node: $PASSED passed, $FAILED failed"
	((FAILED == 0)) || exit 1
	exit 0
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- setup --------------------------------------------------------------------------------

tools() {
	"$PF_E2E_DIR/tools.sh" >&2
	"$PFN_DIR/k8s.sh" >&2
	local t
	t=$(pf_now_ms)
	(cd "$REPO" && CGO_ENABLED=0 go build -o "$RUN/podfence" ./cmd/podfence && CGO_ENABLED=0 go build -o "$RUN/podfence-extender" ./cmd/podfence-extender) ||
		pf_die "CGO_ENABLED=0 go build ./cmd/podfence ./cmd/podfence-extender failed"
	pf_log "podfence built in $(pf_elapsed "$t")s"
}
recover_stale
step "tools (cached) and a static podfence"
timed tools tools

for p in "$ETCD_PORT" $((ETCD_PORT + 1)) "$API_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$WEBHOOK_PORT" "$METRICS_PORT" "$EXTENDER_PORT"; do
	port_free "$p" || pf_die "port $p is in use (set PODFENCE_E2E_NODE_PORTS)"
done

# Pools fitted to this machine: X is the highest online CPU, the rest is the default pool.
ONLINE=$(cpulist_norm "$(cat /sys/devices/system/cpu/online)")
X=$(cpulist_expand "$ONLINE" | tail -n1)
DEF=$(cpulist_expand "$ONLINE" | grep -vx "$X" | cpulist_compress)
[[ -n $DEF ]] || pf_die "one online CPU ($ONLINE): need at least 2 (the default pool plus one more)"
NCPU=$(cpulist_expand "$ONLINE" | grep -c .)
POOLED=1 # CPU X, in either phase
mkdir -p "$RUN/pools"
cat >"$RUN/pools/poolconfig-a.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  exclusive_a: {cpus: "$X", hyperThreadingPolicy: multiThreaded}
nodeSelector: {podfence-e2e/phase: a}
EOF
cat >"$RUN/pools/poolconfig-b.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  shared_s: {cpus: "$X"}
nodeSelector: {podfence-e2e/phase: b}
EOF
cat >"$RUN/profiles.yaml" <<EOF
- name: e2e
  namespaces: [$NS]
  podSelector: {matchLabels: {podfence-e2e/coresched: "on"}}
  group: e2e-group
EOF
pf_log "online CPUs $ONLINE: default pool $DEF; phase A exclusive_a=$X, phase B shared_s=$X"

control_plane() {
	pki_init || pf_die "PKI (openssl) failed"
	etcd_start || pf_die "etcd not healthy within 30s"
	apiserver_start || pf_die "kube-apiserver not ready within 120s"
	kc create namespace "$NS" >/dev/null
	kc create serviceaccount default -n "$NS" >/dev/null # no controller-manager to make it
}
step "etcd and kube-apiserver $PFN_K8S_VERSION on 127.0.0.1:$API_PORT"
timed control-plane control_plane
pass "control plane" "etcd $(etcd --version | awk '/etcd Version/ {print $3}'), kube-apiserver $(kc version -o json | jq -r .serverVersion.gitVersion) ready; kubectl $(kc version -o json | jq -r .clientVersion.gitVersion)"

# --- deploy/ through kubectl apply -k --------------------------------------------------------

deploy() {
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
step "deploy/ (kubectl apply -k), webhook certificate from hack/certs.sh"
timed deploy deploy
# The agent talks to the API server as deploy/'s ServiceAccount (a TokenRequest token), so
# that its RBAC is what is tested: Events and its Node's info, nothing else.
AGENT_TOKEN=$(kc create token podfence-agent -n podfence-system --duration 2h) ||
	pf_die "no token for podfence-system/podfence-agent (deploy/ applied?)"
kubeconfig "$RUN/agent.kubeconfig" "$AGENT_TOKEN"
kc create serviceaccount default -n podfence-system >/dev/null # for the refused pod below

# orphan_containerd: PIDs of containerd processes running our config that containerd.sh does
# not know of (see containerd_start).
orphan_containerd() {
	local f pid
	while read -r f; do
		pid=${f#/proc/} pid=${pid%/cmdline}
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$PF_BIN/containerd" ]] && echo "$pid"
	done < <(grep -lsaF -- "$PF_CONTAINERD_CONFIG" /proc/[0-9]*/cmdline)
	return 0
}

# containerd_start: e2e/containerd.sh start, once more if it fails. containerd.sh records the
# PID of `setsid containerd &` and checks at once that its cmdline names the config; when
# the forked shell has not exec'd yet (a loaded machine), the check fails, start reports
# "containerd exited during startup" and leaves the real containerd running, unknown to
# stop. Such an orphan is ended here, by its exact config path, before the retry.
containerd_start() {
	local try pid
	for try in 1 2; do
		if env=$("$PF_E2E_DIR/containerd.sh" start 7>&- 8>&- 9>&-); then
			eval "$env"
			return 0
		fi
		for pid in $(orphan_containerd); do
			pf_log "containerd.sh start lost containerd pid $pid (attempt $try); ending it"
			kill -TERM "$pid" 2>/dev/null || true
			wait_until 10 test ! -d "/proc/$pid" || kill -KILL "$pid" 2>/dev/null || true
		done
		"$PF_E2E_DIR/containerd.sh" stop 7>&- 8>&- 9>&- >&2 || true
	done
	return 1
}

step "containerd with NRI, the webhook, the agent (phase A), the kubelet"
start_node() {
	started=1
	containerd_start || pf_die "e2e/containerd.sh start failed twice"
	webhook_start || pf_die "the webhook did not answer /healthz within 20s"
	mkdir -p "$DP_DIR" # as the DaemonSet's hostPath (type Directory): the kubelet's dir exists
	agent_start a || pf_die "the agent did not start"
}
timed containerd start_node

sysctls_save
start_kubelet() {
	kubelet_prepare
	kubelet_start || pf_die "the kubelet is not healthy within 60s"
	wait_until 60 kc get node "$NODE" || pf_die "the kubelet did not register node $NODE"
}
timed kubelet start_kubelet
pf_log "kubelet up (pid ${BG_PID[kubelet]}); node $NODE registered"

# --- phase A: default + exclusive ---------------------------------------------------------

phase_a() {
	local ids pid
	expect_log "device plugin: registered with the kubelet" 0 "msg=\"registered with the kubelet\".*resource=podfence.io/exclusive_a" 30
	expect_capacity "node: the device plugin advertises exclusive_a (one device per CPU)" podfence.io/exclusive_a 1 1
	expect_eq "kubelet: pod-resources lists the allocatable devices" \
		"$(podres | jq -r '[.allocatable[] | select(.resource == "podfence.io/exclusive_a") | .ids[]] | join(",")')" "$X" "podfence.io/exclusive_a devices"
	expect_eq "kubelet reservation: allocatable cpu = capacity - pooled CPUs (systemReserved cpu=$POOLED)" \
		"$(node_res capacity cpu)/$(node_res allocatable cpu)" "$NCPU/$((NCPU - POOLED))" "capacity/allocatable cpu"
	expect_node_info

	# The webhook's own namespace is excluded from its configurations: there the agent is
	# the last line. It refuses the container and says so with an Event (deploy/'s RBAC).
	if apply refused "$NODE" "{}" "{}" podfence-system '{podfence.io/cpu-pools: "{not json"}'; then
		expect_refusal_event "bad annotation where the webhook does not look: the agent refuses, with an Event" refused
		kc delete pod -n podfence-system refused --wait=true --timeout=60s >/dev/null 2>&1 || true
	else
		fail "refused pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# A pod asking for no pool: default pool, nothing written by the webhook.
	if launch_pod "default pod runs" def "$NODE" "{}"; then
		expect_stored "default pod: the webhook adds no pool annotation" def a:podfence.io/cpu-pools="<none>"
		expect_ctr "default pod: default pool" def cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1
		expect_env "default pod: no pool env" def EXCLUSIVE_CPUS="<unset>" SHARED_CPUS="<unset>"
	fi

	# Exclusive: webhook → device plugin Allocate → annotation → NRI cpuset.
	if launch_pod "exclusive pod runs" excl "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_stored "exclusive pod: the webhook writes cpu-pools" excl a:podfence.io/cpu-pools='{"app":{"exclusive_a":1}}'
		ids=$(allocated podfence.io/exclusive_a excl)
		expect_eq "exclusive pod: the kubelet allocated one device of exclusive_a" "$ids" "$X" "device IDs"
		expect_eq "exclusive pod: Allocate's annotation reached the runtime" \
			"$(runtime_annotation excl podfence.io/exclusive-cpus)" "$ids" "podfence.io/exclusive-cpus"
		expect_ctr "exclusive pod: cgroup cpuset = the allocated device IDs" excl \
			cpuset.cpus="$ids" Cpus_allowed_list="$ids" cpu.cfs_quota_us=-1
		expect_eq "exclusive pod: whole cores (no SMT here: one thread per core)" "$(whole_cores "$ids")" yes "whole cores"
		expect_env "exclusive pod: env" excl EXCLUSIVE_CPUS="$ids" SHARED_CPUS="<unset>"
		expect_allocated "exclusive pod: node allocation" podfence.io/exclusive_a 1
		expect_log "device plugin: Allocate answered with the CPUs" 0 "msg=allocated .*resource=podfence.io/exclusive_a .*EXCLUSIVE_CPUS:$X" 5
	fi

	# Capacity is enforced by the kubelet's device accounting.
	if apply excl-2 "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_admission_refused "second exclusive pod while CPU $X is allocated: the kubelet refuses it" excl-2 podfence.io/exclusive_a
	else
		fail "second exclusive pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# The webhook refuses what the agent could not serve.
	expect_refused_apply "webhook refuses an unknown pool" bad-pool 'denied the request.*exclusive_zz' '{podfence.io/exclusive_zz: "1"}'
	expect_refused_apply "webhook refuses a fractional exclusive request" bad-frac 'denied the request.*whole number' '{podfence.io/exclusive_a: "1500m"}'

	# EPC and core scheduling: the webhook's mutation only (the pod is never bound: no SGX,
	# no core scheduling on this host).
	if apply meta "" '{sgx.intel.com/epc: "1Mi"}' '{podfence-e2e/coresched: "on"}'; then
		expect_stored "EPC limit and core-sched profile: the webhook's mutation" meta \
			a:epc-limit.nri.io/container.app=1048576 l:podfence.io/core-sched-group=e2e-group a:podfence.io/cpu-pools="<none>"
	else
		fail "EPC limit and core-sched profile: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# Deleting frees the CPU: the next exclusive pod gets it.
	delete_pods excl excl-2 meta
	expect_allocated "exclusive pod deleted: allocation back to 0" podfence.io/exclusive_a 0
	if launch_pod "freed CPU: a new exclusive pod runs" excl-3 "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_ctr "freed CPU: the new exclusive pod gets CPU $X" excl-3 cpuset.cpus="$X" Cpus_allowed_list="$X"
	fi

	# Kubelet restart: it wipes its device-plugin dir; the agent serves and registers again.
	pid=$(ctr_pid excl-3 || true)
	local off
	off=$(log_lines)
	bg_stop kubelet 15
	kubelet_start || fail "kubelet restart" "not healthy within 60s"
	expect_log "kubelet restart: the device plugin registers again" "$off" "msg=\"registered with the kubelet\".*resource=podfence.io/exclusive_a" 30
	expect_capacity "kubelet restart: exclusive_a advertised again" podfence.io/exclusive_a 1 1
	expect_ctr "kubelet restart: the exclusive pod did not move" excl-3 pid="$pid" cpuset.cpus="$X" Cpus_allowed_list="$X"
	# (pod-resources lists a pod once the restarted kubelet has it from the API server again)
	wait_until 30 test_allocated_ids podfence.io/exclusive_a excl-3 "$X" || true
	expect_eq "kubelet restart: the allocation survives" "$(allocated podfence.io/exclusive_a excl-3)" "$X" "device IDs"

	delete_pods def excl-3
	expect_allocated "phase A pods deleted: allocation back to 0" podfence.io/exclusive_a 0
}
step "phase A: pools default=$DEF exclusive_a=$X"
timed phase-a phase_a

# --- phase B: default + shared ------------------------------------------------------------

phase_b() {
	agent_stop
	agent_start b || return 0
	expect_log "agent (phase B): the other pool config, selected by node label" "$AGENT_OFF" "msg=node .*pools=\"default=$DEF shared_s=$X\""
	expect_log "device plugin (phase B): shared_s registered" "$AGENT_OFF" "msg=\"registered with the kubelet\".*resource=podfence.io/shared_s" 30
	expect_capacity "node: the device plugin advertises shared_s (one device per millicpu)" podfence.io/shared_s 1000 1000

	if launch_pod "phase B default pod runs" def-b "$NODE" "{}"; then
		expect_ctr "phase B default pod: default pool" def-b cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1
	fi
	if launch_pod "shared pod (500 millicpu) runs" shr "$NODE" '{podfence.io/shared_s: "500"}'; then
		expect_stored "shared pod: the webhook writes cpu-pools" shr a:podfence.io/cpu-pools='{"app":{"shared_s":500}}'
		expect_eq "shared pod: the kubelet allocated 500 devices" \
			"$(allocated podfence.io/shared_s shr | tr ',' '\n' | grep -c .)" 500 "devices"
		expect_ctr "shared pod: cpuset = the shared pool, CFS quota = 500 millicpu" shr \
			cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000
		expect_env "shared pod: env" shr SHARED_CPUS="$X" EXCLUSIVE_CPUS="<unset>"
	fi
	if launch_pod "second shared pod (250 millicpu) runs" shr-2 "$NODE" '{podfence.io/shared_s: "250"}'; then
		expect_ctr "second shared pod: same pool, its own quota" shr-2 \
			cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=25000 cpu.cfs_period_us=100000
	fi
	expect_allocated "shared pods: node allocation" podfence.io/shared_s 750
	if apply shr-3 "$NODE" '{podfence.io/shared_s: "300"}'; then
		expect_admission_refused "shared pod over the pool (750 + 300 > 1000 millicpu): the kubelet refuses it" shr-3 podfence.io/shared_s
	else
		fail "third shared pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi
	delete_pods shr shr-2 shr-3 def-b
	expect_allocated "shared pods deleted: allocation back to 0" podfence.io/shared_s 0
	expect_capacity "shared pods deleted: the whole pool is allocatable" podfence.io/shared_s 1000 1000
}
step "phase B: agent restarted with node label phase=b: pools default=$DEF shared_s=$X"
timed phase-b phase_b

# --- phase C: kube-scheduler with the podfence extender -----------------------------------
# Last, so that no pod above is ever scheduled (they all name their node, or stay unbound on
# purpose). `podfence extender` (its debug log: one msg=filter / msg=prioritize line per
# call) and kube-scheduler with it as a non-ignorable extender; these pods have no nodeName.

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
# kube-scheduler with no serving port and no leader election.
scheduler_start() {
	bg_start extender "$RUN/podfence-extender" --listen "127.0.0.1:$EXTENDER_PORT" \
		--kubeconfig "$RUN/admin.kubeconfig" --log-level debug
	wait_until 30 curl -sf "http://127.0.0.1:$EXTENDER_PORT/healthz" || return 1
	cat >"$RUN/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$RUN/admin.kubeconfig"}
leaderElection: {leaderElect: false}
extenders:
- urlPrefix: http://127.0.0.1:$EXTENDER_PORT
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: 1
  nodeCacheCapable: true
  ignorable: false
  httpTimeout: 5s
EOF
	bg_start kube-scheduler kube-scheduler --config "$RUN/kube-scheduler.yaml" --secure-port 0 --v 2
	sleep 1
	bg_running kube-scheduler
}

# sched_pod NAME [LABELS]: a pod without nodeName, for the scheduler.
sched_pod() { apply "$1" "" "{}" "${2:-}"; }
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

phase_sched() {
	local off line node ev lf lp what
	if ! scheduler_start; then
		fail "scheduler: kube-scheduler and podfence extender start" "extender $(bg_running extender && echo running || echo exited), kube-scheduler $(bg_running kube-scheduler && echo running || echo exited): $(tail -n 3 "$RUN/extender.log" "$RUN/kube-scheduler.log" 2>/dev/null | tr '\n' '|')"
		return 0
	fi
	# Nodes are registered with the taint node.kubernetes.io/not-ready:NoSchedule (the
	# TaintNodesByCondition admission plugin); the controller-manager's node lifecycle
	# controller, not run here, manages it from the Ready condition. Removed here by hand:
	# the kubelet's node may well stay NotReady (no CNI: only host-network pods run here).
	untaint "$NODE"
	pass "scheduler: kube-scheduler $(kube-scheduler --version | awk '{print $2}') runs with the podfence extender" \
		"node $NODE Ready=$(node_ready "$NODE") untainted; extender on 127.0.0.1:$EXTENDER_PORT (/healthz ok, $(grep -ao 'msg="informers synced".*' "$EXT_LOG" | head -n1)); filterVerb+prioritizeVerb, nodeCacheCapable, not ignorable"

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
		fail "$what" "not bound within 30s ($APPLY_OUT); FailedScheduling: $(sched_event sched-implicit); scheduler log: $(tail -n 3 "$RUN/kube-scheduler.log" | tr '\n' '|')"
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
	if grep -qaE '^E[0-9]{4} ' "$RUN/kube-scheduler.log"; then
		pf_log "kube-scheduler logged errors: $(grep -aE '^E[0-9]{4} ' "$RUN/kube-scheduler.log" | tail -n 3 | cut -c1-300 | tr '\n' '|')"
	fi
}
# untaint NODE: removes the not-ready NoSchedule taint.
untaint() {
	if kc get node "$1" -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready; then
		kc taint node "$1" node.kubernetes.io/not-ready:NoSchedule- >/dev/null || pf_log "warning: could not untaint node $1"
	fi
}
# node_ready NODE: its Ready condition, "status (reason: message)".
node_ready() { kc get node "$1" -o json | jq -r '.status.conditions[]? | select(.type == "Ready") | "\(.status) (\(.reason): \(.message | .[:80]))"'; }
step "phase C: kube-scheduler $PFN_K8S_VERSION with the podfence extender"
timed scheduler phase_sched

finished=1
