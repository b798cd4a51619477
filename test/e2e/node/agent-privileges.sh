# shellcheck shell=bash
# Proof: the agent runs as deploy/'s unprivileged pod (issue #20 item 6). The live DaemonSet's
# pod template has deploy/'s host namespaces, security contexts, mounts, arguments and
# ServiceAccount (the overlay touches none of them: compared with deploy/'s own DaemonSet as
# the API server defaults it); the running agent process holds only the two capabilities the
# DaemonSet adds, under a seccomp filter, with no_new_privs; its root and /sys are read-only,
# /sys/fs/cgroup is writable, and a cgroup can be made, written and removed with those
# capabilities (as for EPC caps and VM sandbox cgroups). What the agent does with them
# (cpusets through NRI, the device plugin, token-checked metrics, its Node's patch) the other
# checks prove with this same pod. Sourced by run.sh after agent.sh.

# CAP_NAMES: capabilities(7), by number.
CAP_NAMES=(chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap linux_immutable
	net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner sys_module sys_rawio sys_chroot
	sys_ptrace sys_pacct sys_admin sys_boot sys_nice sys_resource sys_time sys_tty_config mknod lease
	audit_write audit_control setfcap mac_override mac_admin syslog wake_alarm block_suspend audit_read
	perfmon bpf checkpoint_restore)

# cap_names HEX: the names in a capability mask of /proc/<pid>/status.
cap_names() {
	local m=$((16#$1)) i out=""
	for ((i = 0; i < ${#CAP_NAMES[@]}; i++)); do
		if (((m >> i) & 1)); then out+="${out:+,}${CAP_NAMES[i]}"; fi
	done
	echo "${out:-none}"
}

# DS_SHIPPED: the parts of the agent's DaemonSet that must be deploy/'s.
DS_SHIPPED='.spec.template.spec | {serviceAccountName, hostPID, hostNetwork, securityContext, volumes,
  initContainers: [.initContainers[] | {name, command, args, securityContext, volumeMounts}],
  containers: [.containers[] | {name, args, securityContext, volumeMounts, ports, livenessProbe, readinessProbe}]}'

# mount_opts PID MOUNTPOINT: the mount options of MOUNTPOINT in PID's mount namespace.
mount_opts() { awk -v m="$2" '$5 == m {split($6, o, ","); print o[1]}' "/proc/$1/mountinfo" | tail -n1; }

prove_agent_privileges() {
	local shipped live pid st eff prm bnd sec nnp uid out m mounts="" want
	shipped=$(kc kustomize "$RUN/deploy" | kc create --dry-run=client -o json -f - |
		jq -c 'if .kind == "List" then .items[] else . end | select(.kind == "DaemonSet")' |
		kc apply --dry-run=server -o json -f - 2>&1 | jq -S "$DS_SHIPPED" 2>&1)
	live=$(kc get daemonset podfence-agent -n "$PF_NS" -o json | jq -S "$DS_SHIPPED")
	if [[ -n $live && $live == "$shipped" ]]; then
		pass "privileges: the agent's DaemonSet has deploy/'s host namespaces, security contexts, mounts and ServiceAccount" \
			"$(jq -r '"hostPID=\(.hostPID) hostNetwork=\(.hostNetwork) seccomp=\(.securityContext.seccompProfile.type); agent: privileged=\(.containers[0].securityContext.privileged // false) allowPrivilegeEscalation=\(.containers[0].securityContext.allowPrivilegeEscalation) readOnlyRootFilesystem=\(.containers[0].securityContext.readOnlyRootFilesystem) capabilities drop \(.containers[0].securityContext.capabilities.drop | join(",")) add \(.containers[0].securityContext.capabilities.add | join(",")); \(.volumes | length) volumes"' <<<"$live")"
	else
		fail "privileges: the agent's DaemonSet has deploy/'s host namespaces, security contexts, mounts and ServiceAccount" \
			"differs: $(diff <(echo "$shipped") <(echo "$live") | grep '^[<>]' | head -n 8 | tr '\n' ' ')"
	fi

	if ! pid=$(agent_pid) || [[ ! -r /proc/$pid/status ]]; then
		fail "privileges: the agent process" "no running agent container (pod $AGENT_POD, pid '${pid:-}')"
		return 0
	fi
	st=/proc/$pid/status
	eff=$(awk '/^CapEff:/ {print $2}' "$st") prm=$(awk '/^CapPrm:/ {print $2}' "$st") bnd=$(awk '/^CapBnd:/ {print $2}' "$st")
	sec=$(awk '/^Seccomp:/ {print $2}' "$st") nnp=$(awk '/^NoNewPrivs:/ {print $2}' "$st") uid=$(awk '/^Uid:/ {print $3}' "$st")
	want=net_admin,sys_ptrace
	if [[ $(cap_names "$eff") == "$want" && $(cap_names "$prm") == "$want" && $(cap_names "$bnd") == "$want" && $sec == 2 && $nnp == 1 ]]; then
		pass "privileges: the agent process holds only the DaemonSet's capabilities, under seccomp" \
			"pid $pid (host), euid $uid: CapEff=$eff ($(cap_names "$eff")), CapPrm=$prm, CapBnd=$bnd; Seccomp=$sec (filter: RuntimeDefault), NoNewPrivs=$nnp"
	else
		fail "privileges: the agent process holds only the DaemonSet's capabilities, under seccomp" \
			"pid $pid: CapEff=$eff ($(cap_names "$eff")), CapPrm=$(cap_names "$prm"), CapBnd=$(cap_names "$bnd") (want $want each); Seccomp=$sec (want 2); NoNewPrivs=$nnp (want 1)"
	fi

	for m in / /sys /sys/fs/cgroup /sys/fs/cgroup/cpuset /var/run/nri /var/lib/kubelet/device-plugins /var/lib/kubelet/pod-resources /var/lib/podfence /opt/podfence/bin; do
		mounts+="${mounts:+ }$m=$(mount_opts "$pid" "$m")"
	done
	if [[ $mounts == "/=ro /sys=ro /sys/fs/cgroup=rw /sys/fs/cgroup/cpuset=rw /var/run/nri=rw /var/lib/kubelet/device-plugins=rw /var/lib/kubelet/pod-resources=ro /var/lib/podfence=rw /opt/podfence/bin=ro" ]]; then
		pass "privileges: the agent's mounts: read-only root and /sys, host cgroupfs and sockets writable" "$mounts"
	else
		fail "privileges: the agent's mounts: read-only root and /sys, host cgroupfs and sockets writable" "$mounts"
	fi

	# A cgroup made, written and removed in the pod, with its capabilities (uid 0, owner of cgroupfs).
	m=/sys/fs/cgroup/cpuset${PF_CGROUP_PARENT}/pf-e2e-agent-write
	if out=$(kc exec -n "$PF_NS" "$AGENT_POD" -c agent -- sh -c "mkdir $m && cat $m/../cpuset.mems >$m/cpuset.mems && echo $X >$m/cpuset.cpus && cat $m/cpuset.cpus && rmdir $m" 2>&1) &&
		[[ $out == "$X" ]]; then
		pass "privileges: cgroupfs writes work in the agent's container" "mkdir $m, cpuset.cpus=$out, rmdir: done by kubectl exec (same capabilities and seccomp)"
	else
		fail "privileges: cgroupfs writes work in the agent's container" "kubectl exec: $(tr '\n' ' ' <<<"$out")"
		rmdir "$m" 2>/dev/null || true
	fi
	if out=$(kc exec -n "$PF_NS" "$AGENT_POD" -c agent -- touch /pf-e2e-probe 2>&1); then
		fail "privileges: the agent's root filesystem is read-only" "touch /pf-e2e-probe succeeded"
	else
		pass "privileges: the agent's root filesystem is read-only" "touch /pf-e2e-probe: $(head -n1 <<<"$out")"
	fi
}
