# shellcheck shell=bash
# Facts of the node e2e, for run.sh: expect_* helpers print one PASS or FAIL line (checks.sh's
# pass/fail) from what kubectl, the kubelet's pod-resources API, containerd and the kernel
# report; test_* helpers are their wait_until conditions. Sourced after cluster.sh, pods.sh
# and ../checks.sh; uses RUN, NODE, NS and AGENT_LOG.

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
