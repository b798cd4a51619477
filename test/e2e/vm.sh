# shellcheck shell=bash
# The VM-sandbox checks of test/e2e/run.sh: VM sandbox host cgroups. Sourced after checks.sh;
# run.sh calls prove_vm_sandbox_cgroups with the agent running on the shared pool config
# (default DEF, shared_s X).
#
# containerd's runtime handler `kata` is runc (containerd.sh), so NRI reports
# runtimeHandler "kata" and the agent (default --vm-runtimes kata,kata-*) treats the pod as a
# VM sandbox: its shim (containerd-shim-runc-v2, the pause's parent) and "hypervisor" (the
# pause process, the pid NRI reports) go into <parent>/podfence-vm-<pod id>, sized from the
# pod's overhead and containers. Every value is read back from the kernel: the cgroup's
# cpuset.cpus, cpu.cfs_quota_us/cpu.cfs_period_us, memory.limit_in_bytes, and
# /proc/<tid>/cgroup of every thread of the shim and the pause.

# vm_pod_json NAME KEY=VALUE...: a pod on runtime kata (runp --runtime kata) with the
# RuntimeClass overhead 250m CPU / 128Mi, and these annotations.
vm_pod_json() {
	local name=$1
	shift
	cat <<EOF
{
  "metadata": {"name": "$name", "namespace": "$NS", "uid": "uid-$name", "attempt": 0},
  "labels": {"io.kubernetes.pod.name": "$name", "io.kubernetes.pod.namespace": "$NS"},
  "annotations": $(json_map "$@"),
  "log_directory": "$RUN/logs/$name",
  "linux": {
    "cgroup_parent": "$PF_CGROUP_PARENT",
    "overhead": {"cpu_period": 100000, "cpu_quota": 25000, "memory_limit_in_bytes": 134217728},
    "security_context": {"namespace_options": {"network": 2, "pid": 1}}
  }
}
EOF
}

# vm_ctr_json NAME CPU_QUOTA CPU_PERIOD MEMORY: busybox sleep with these limits (0: none).
vm_ctr_json() {
	cat <<EOF
{
  "metadata": {"name": "$1"},
  "image": {"image": "$PF_BUSYBOX_IMAGE"},
  "command": ["sleep", "86400"],
  "log_path": "$1.log",
  "linux": {
    "resources": {"cpu_quota": $2, "cpu_period": $3, "memory_limit_in_bytes": $4},
    "security_context": {"namespace_options": {"network": 2, "pid": 1}}
  }
}
EOF
}

# vm_add POD CTR QUOTA PERIOD MEMORY: creates and starts container CTR in pod POD; sets
# VMC[POD/CTR] to its ID.
declare -A VMC=()
vm_add() {
	local cid out
	vm_ctr_json "$2" "$3" "$4" "$5" >"$RUN/vm-$2.ctr.json"
	if ! cid=$(pf_crictl create "${POD[$1]}" "$RUN/vm-$2.ctr.json" "$RUN/$1.pod.json" 2>&1); then
		fail "vm: create $2 in $1" "$cid"
		return 0
	fi
	out=$(pf_crictl start "$cid" 2>&1) || fail "vm: start $2 in $1" "$out"
	VMC[$1/$2]=$cid
}

# vm_del POD CTR: stops and removes container CTR of POD.
vm_del() {
	pf_crictl stop "${VMC[$1/$2]}" >/dev/null 2>&1 || true
	pf_crictl rm "${VMC[$1/$2]}" >/dev/null 2>&1 || pf_log "warning: crictl rm $2 failed"
	unset "VMC[$1/$2]"
}

# sb_dir POD CONTROLLER: the pod's sandbox cgroup directory in CONTROLLER's hierarchy.
sb_dir() { echo "/sys/fs/cgroup/$2$PF_CGROUP_PARENT/podfence-vm-${POD[$1]}"; }

# sb_pids POD: the pause (the pid NRI reports) and its parent, the shim.
sb_pids() {
	local pause
	pause=$(pf_crictl inspectp -o go-template --template '{{.info.pid}}' "${POD[$1]}" 2>/dev/null) || return 1
	echo "$pause $(awk '{print $4}' "/proc/$pause/stat")"
}

# sb_threads POD: "N/M": of the M threads of the shim and the pause, N are in the sandbox
# cgroup in each of the cpuset, cpu and memory hierarchies (/proc/<pid>/task/<tid>/cgroup).
sb_threads() {
	local want=$PF_CGROUP_PARENT/podfence-vm-${POD[$1]} pid t n=0 m=0
	for pid in $(sb_pids "$1"); do
		for t in /proc/"$pid"/task/*; do
			m=$((m + 1))
			if awk -F: -v w="$want" '$2 ~ /(^|,)(cpuset|cpu|memory)(,|$)/ {n++; if ($3 == w) ok++}
				END {exit !(n >= 3 && ok == n)}' "$t/cgroup"; then
				n=$((n + 1))
			fi
		done
	done
	echo "$n/$m"
}

# sb_fact POD KEY: one fact about POD's sandbox cgroup, or "<absent>".
sb_fact() {
	local f
	case $2 in
	cpuset.cpus) f=$(sb_dir "$1" cpuset)/cpuset.cpus ;;
	cpu.*) f=$(sb_dir "$1" cpu)/$2 ;;
	memory.*) f=$(sb_dir "$1" memory)/$2 ;;
	threads) sb_threads "$1" && return 0 ;;
	esac
	if [[ -r $f ]]; then cat "$f"; else echo "<absent>"; fi
}

# expect_sb WHAT POD KEY=VALUE...: the pod's sandbox cgroup facts must match; threads=all
# means every thread of the shim and the pause is in the cgroup.
expect_sb() {
	local what=$1 pod=$2 kv key want got facts="" bad=""
	shift 2
	for kv in "$@"; do
		key=${kv%%=*} want=${kv#*=}
		got=$(sb_fact "$pod" "$key")
		if [[ $key == cpuset.cpus ]]; then want=$(cpulist_norm "$want") got=$(cpulist_norm "$got"); fi
		if [[ $key == threads && $want == all ]]; then
			[[ $got =~ ^([0-9]+)/([0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" && $got != 0/0 ]] && want=$got
		fi
		facts+="${facts:+ }$key=$got"
		[[ $got == "$want" ]] || bad+="${bad:+; }$key=$got (want $key=$want)"
	done
	if [[ -z $bad ]]; then
		pass "$what" "$facts"
	else
		fail "$what" "$bad [$(sb_dir "$pod" cpu)]"
	fi
}

prove_vm_sandbox_cgroups() {
	local off vm_quota sb pid cg
	step "VM sandboxes (runtime handler kata): host cgroups, pools default=$DEF shared_s=$X"
	pf_crictl rmp -a -f >/dev/null
	# shellcheck disable=SC2034 # CID is checks.sh's
	POD=() CID=()

	off=$(log_lines)
	vm_pod_json vm "podfence.io/cpu-pools={\"c2\": {\"shared_s\": 250}}" >"$RUN/vm.pod.json"
	POD["vm"]=$(pf_crictl runp --runtime kata "$RUN/vm.pod.json" 2>&1) || fail "vm: runp --runtime kata" "${POD["vm"]}"
	sb=$(sb_dir vm cpu)
	expect_log "VM sandbox: the agent made its cgroup at RunPodSandbox" "$off" \
		"msg=\"VM sandbox cgroup\" pod=$NS/vm event=RunPodSandbox cgroup=$PF_CGROUP_PARENT/podfence-vm-${POD["vm"]} adopted=false"
	expect_sb "VM sandbox, no container yet: the overhead alone, on the default pool" vm \
		cpuset.cpus="$DEF" cpu.cfs_quota_us=25000 cpu.cfs_period_us=100000 memory.limit_in_bytes=134217728 threads=all

	vm_add vm c1 25000 50000 67108864
	expect_sb "VM sandbox + c1 (25000/50000 µs = 500m, 64Mi, default pool): 250m+500m, 128Mi+64Mi" vm \
		cpuset.cpus="$DEF" cpu.cfs_quota_us=75000 cpu.cfs_period_us=100000 memory.limit_in_bytes=201326592 threads=all
	vm_add vm c2 0 0 33554432
	expect_sb "VM sandbox + c2 (shared_s 250m by podfence's quota, 32Mi): quota 100000, cpusets united" vm \
		cpuset.cpus="$ONLINE" cpu.cfs_quota_us=100000 memory.limit_in_bytes=234881024 threads=all
	pid=$(pf_crictl inspect -o go-template --template '{{.info.pid}}' "${VMC[vm/c1]}" 2>/dev/null)
	cg=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' "/proc/$pid/cgroup" 2>/dev/null)
	if [[ $cg == "$PF_CGROUP_PARENT/${VMC[vm/c1]}" ]]; then
		pass "VM sandbox: the container's process stays in its own cgroup" "c1 pid $pid in $cg"
	else
		fail "VM sandbox: the container's process stays in its own cgroup" "c1 pid $pid in ${cg:-?} (want $PF_CGROUP_PARENT/${VMC[vm/c1]})"
	fi
	vm_add vm c3 0 0 16777216
	expect_sb "VM sandbox + c3 without a CPU limit: no quota; memory +16Mi" vm \
		cpu.cfs_quota_us=-1 memory.limit_in_bytes=251658240 threads=all
	vm_del vm c3
	expect_sb "VM sandbox - c3: quota back" vm cpu.cfs_quota_us=100000 memory.limit_in_bytes=234881024
	vm_del vm c2
	expect_sb "VM sandbox - c2: back to the default pool, 750m, 192Mi" vm \
		cpuset.cpus="$DEF" cpu.cfs_quota_us=75000 memory.limit_in_bytes=201326592 threads=all

	launch plain
	if [[ -d $(sb_dir plain cpu) ]]; then
		fail "runc pod: no sandbox cgroup" "$(sb_dir plain cpu) exists"
	else
		pass "runc pod: no sandbox cgroup" "no $(sb_dir plain cpu)"
	fi

	step "agent restart with a VM sandbox running"
	vm_quota=$(sb_fact vm cpu.cfs_quota_us)
	agent_stop
	agent_start "$RUN/poolconfig-shared.yaml"
	expect_log "agent restart: the VM sandbox cgroup is adopted" "$AGENT_OFF" \
		"msg=\"VM sandbox cgroup\" pod=$NS/vm event=Synchronize cgroup=$PF_CGROUP_PARENT/podfence-vm-${POD["vm"]} adopted=true"
	expect_sb "agent restart: the VM sandbox keeps its limits and threads" vm \
		cpuset.cpus="$DEF" cpu.cfs_quota_us="$vm_quota" memory.limit_in_bytes=201326592 threads=all

	off=$(log_lines)
	pf_crictl rmp -f "${POD["vm"]}" >/dev/null 2>&1 || pf_log "warning: crictl rmp vm failed"
	expect_log "pod removed: the agent removes the VM sandbox cgroup" "$off" \
		"msg=\"VM sandbox cgroup removed\" pod=$NS/vm event=RemovePodSandbox"
	if [[ -d $sb ]]; then
		fail "pod removed: no VM sandbox cgroup left" "$sb exists"
	else
		pass "pod removed: no VM sandbox cgroup left" "no $sb"
	fi
	unset "POD[vm]"
	remove plain
}
