# shellcheck shell=bash
# Clean-up of the node e2e, for run.sh: what an interrupted earlier run left (recover_stale),
# what this run could leave (leftovers), and the EXIT trap (on_exit): log tails on a failure,
# every process stopped, host sysctls and dirs restored, the clean-up checked, the summary
# line and the exit code. Sourced after cluster.sh, cluster-setup.sh, node.sh and agent.sh;
# uses RUN, T0, TIMES, started and finished of run.sh.
# shellcheck disable=SC2154 # started and finished are run.sh's

# recover_stale: what a run killed without its clean-up (SIGKILL, power loss) left: its
# processes (they name their run dir), host sysctls (from its sysctl.saved), containerd (and
# with it the node's mount namespace), the pod network's bridge, the host dirs it made.
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
			"$d"/* | "$PFN_BIN"/* | "$PFN_SHARED_BIN"/* | "$PF_BIN"/*)
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
		cni_bridge_remove
		if [[ -f $d/created-dirs ]]; then
			while read -r f; do rmdir "$f" 2>/dev/null || true; done <"$d/created-dirs"
		fi
		rm -rf "$d"
	done
	return 0
}

# leftovers: anything this run could leave behind, one line each (empty: nothing).
leftovers() {
	local d
	pf_containerd_running && echo "containerd $(cat "$PF_CONTAINERD_PID")"
	orphan_containerd | sed 's/^/containerd /'
	grep -lsF -- "$PF_CONTAINERD_SOCK" /proc/[0-9]*/cmdline | xargs -r grep -lsa containerd-shim | sed 's/^/shim /'
	find /proc/[0-9]*/exe -maxdepth 0 \( -lname "$RUN/*" -o -lname "$PFN_BIN/*" -o -lname "$PFN_SHARED_BIN/*" \) 2>/dev/null | sed 's/^/process /'
	pgrep -af -- "$RUN/" | sed 's/^/process /' # the registry, anything else naming the run dir
	node_ns_procs | sed 's/^/in the node mount namespace: /'
	ip link show "$CNI_BRIDGE" >/dev/null 2>&1 && echo "bridge $CNI_BRIDGE"
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
		for f in agent kubelet kube-apiserver kube-controller-manager kube-scheduler pf-scheduler extender; do
			[[ -s $RUN/$f.log ]] || continue
			echo "---- last 25 lines of $RUN/$f.log ----" >&2
			tail -n 25 "$RUN/$f.log" >&2
		done
		pf_log_tail 25
	fi
	step "clean-up"
	bg_stop kube-controller-manager 10 # first: it would make new pods for what ends below
	bg_stop pf-scheduler 10
	bg_stop extender 10
	bg_stop kube-scheduler 10
	bg_stop kubelet 15
	if ((started)); then "$PF_E2E_DIR/containerd.sh" stop 7>&- 8>&- 9>&- >&2 || true; fi
	bg_stop agent-log 5
	cni_bridge_remove
	bg_stop registry 5
	bg_stop kube-apiserver 15
	bg_stop etcd 10
	changed=$(sysctls_changed)
	sysctls_restore
	host_dirs_remove
	mkdir -p "$PF_WORK"
	for f in agent kubelet kube-apiserver etcd kube-controller-manager kube-scheduler pf-scheduler extender registry; do
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
		pass "clean-up" "no process (none in the node's mount namespace), mount under $PF_WORK or the run dir, cgroup $PF_CGROUP_PARENT, bridge $CNI_BRIDGE or host dir left"
	else
		fail "clean-up" "left behind: $(tr '\n' ';' <<<"$left")"
	fi
	local times="" k
	for k in tools control-plane node kubelet deploy exclusive-pool privileges metrics-auth tenancy node-patch-policy admission-policy shared-pool lifecycle scheduler uninstall helm; do
		[[ -n ${TIMES[$k]:-} ]] && times+=" $k=${TIMES[$k]}s"
	done
	pf_log "e2e-node finished in $(pf_elapsed "$T0")s ($times ); logs in $PF_WORK"
	echo "e2e-node: $PASSED passed, $FAILED failed"
	((FAILED == 0)) || exit 1
	exit 0
}
