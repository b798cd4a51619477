#!/usr/bin/env bash
# Proves the e2e harness end to end on this machine:
#   1. builds/checks tools and images (cached), starts the private containerd with NRI;
#   2. runs a host-network pod + busybox `sleep 3600` via crictl (runp/create/start) and
#      prints the container's Cpus_allowed_list (crictl exec);
#   3. connects the sample NRI plugin (pf-nri-logger) to <work>/nri.sock, asking it to pin
#      new containers to CPU 0 and add an env var; creates a second container and checks
#      the plugin saw RunPodSandbox/CreateContainer/StartContainer and that its cpuset and
#      env adjustments reached the container; a pod on the `kata` handler is seen as such;
#   4. removes everything (pods, containerd, shims, mounts, cgroups) and checks nothing is left.
# Exits non-zero on any failure, with the containerd log tail and the plugin's output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pf_require_root

T0=$(pf_now_ms)
NRI_OUT=$PF_WORK/nri-logger.out
started=0 plugin_pid="" ok=0

on_exit() {
	local rc=$?
	if [[ -n $plugin_pid ]]; then
		kill "$plugin_pid" 2>/dev/null || true
		wait "$plugin_pid" 2>/dev/null || true
	fi
	if ((rc != 0 || !ok)); then
		pf_log_tail 40
		if [[ -f $NRI_OUT ]]; then
			echo "---- NRI plugin output ($NRI_OUT) ----" >&2
			tail -n 20 "$NRI_OUT" >&2
			echo "----" >&2
		fi
	fi
	if ((started)); then "$PF_E2E_DIR/containerd.sh" stop || rc=1; fi
	if ((rc == 0 && !ok)); then rc=1; fi
	if ((rc == 0)); then
		pf_log "SMOKE PASSED in $(pf_elapsed "$T0")s"
	else
		pf_log "SMOKE FAILED (exit $rc)"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

step() { pf_log "== $*"; }

# pod_json NAME UID: a host-network pod under the harness's cgroup parent.
pod_json() {
	cat <<EOF
{
  "metadata": {"name": "$1", "namespace": "pf-smoke", "uid": "$2", "attempt": 0},
  "labels": {"io.kubernetes.pod.name": "$1", "io.kubernetes.pod.namespace": "pf-smoke"},
  "log_directory": "$PF_WORK/pod-logs/$1",
  "linux": {
    "cgroup_parent": "$PF_CGROUP_PARENT",
    "security_context": {"namespace_options": {"network": 2}}
  }
}
EOF
}

# ctr_json NAME: a busybox container sleeping for an hour.
ctr_json() {
	cat <<EOF
{
  "metadata": {"name": "$1"},
  "image": {"image": "$PF_BUSYBOX_IMAGE"},
  "command": ["sleep", "3600"],
  "log_path": "$1.log",
  "linux": {}
}
EOF
}

# run_ctr POD_ID POD_JSON NAME: create + start; prints the container ID.
run_ctr() {
	local cid
	ctr_json "$3" >"$PF_WORK/ctr-$3.json"
	cid=$(pf_crictl create "$1" "$PF_WORK/ctr-$3.json" "$2")
	pf_crictl start "$cid" >/dev/null
	echo "$cid"
}

cpus_allowed() { pf_crictl exec "$1" grep Cpus_allowed_list /proc/self/status | awk '{print $2}'; }

# wait_for_event EVENT [FIELD-MATCH]: poll the plugin output for a JSON line.
wait_for_event() {
	for _ in $(seq 1 100); do
		grep "\"event\":\"$1\"" "$NRI_OUT" 2>/dev/null | grep -q -- "${2:-}" && return 0
		sleep 0.05
	done
	pf_die "NRI plugin did not report $1 ${2:-}"
}

# ---------------------------------------------------------------------------------------
step "tools, images, containerd"
"$PF_E2E_DIR/containerd.sh" start >/dev/null
started=1
ncpu=$(nproc)

step "pod with host networking + busybox sleep 3600 (no NRI plugin yet)"
t=$(pf_now_ms)
pod_json smoke smoke-uid-1 >"$PF_WORK/pod-smoke.json"
pod=$(pf_crictl runp "$PF_WORK/pod-smoke.json")
t_runp=$(pf_elapsed "$t")
t=$(pf_now_ms)
c1=$(run_ctr "$pod" "$PF_WORK/pod-smoke.json" before-nri)
t_ctr=$(pf_elapsed "$t")
[[ $(pf_crictl inspect -o go-template --template '{{.status.state}}' "$c1") == CONTAINER_RUNNING ]] ||
	pf_die "container $c1 is not running"
cpus1=$(cpus_allowed "$c1")
pf_log "container before-nri: Cpus_allowed_list=$cpus1 (host has $ncpu CPUs; runp ${t_runp}s, create+start ${t_ctr}s)"
[[ -n $cpus1 ]] || pf_die "no Cpus_allowed_list from crictl exec"

step "NRI: pf-nri-logger on $PF_NRI_SOCK (adjusts cpuset -> 0, env PF_SMOKE_NRI=1)"
pf-nri-logger -socket "$PF_NRI_SOCK" -name pf-smoke -idx 10 -cpuset 0 -env PF_SMOKE_NRI=1 \
	>"$NRI_OUT" 2>"$PF_WORK/nri-logger.err" </dev/null &
plugin_pid=$!
wait_for_event Synchronize "1 pods, 1 containers"
pf_log "plugin registered; Synchronize saw the running pod"

c2=$(run_ctr "$pod" "$PF_WORK/pod-smoke.json" after-nri)
wait_for_event CreateContainer '"container":"after-nri"'
wait_for_event StartContainer '"container":"after-nri"'
cpus2=$(cpus_allowed "$c2")
# shellcheck disable=SC2016 # expands inside the container
env2=$(pf_crictl exec "$c2" sh -c 'echo "$PF_SMOKE_NRI"')
cg=$(find /sys/fs/cgroup -path "*${PF_CGROUP_PARENT}/$c2/cpuset.cpus" 2>/dev/null | head -n1)
pf_log "container after-nri:  Cpus_allowed_list=$cpus2 PF_SMOKE_NRI=$env2 ${cg:+cgroup cpuset.cpus=$(cat "$cg")}"
[[ $cpus2 == 0 ]] || pf_die "NRI cpuset adjustment not applied: Cpus_allowed_list=$cpus2, want 0"
[[ $env2 == 1 ]] || pf_die "NRI env adjustment not applied: PF_SMOKE_NRI='$env2', want 1"
[[ $(cpus_allowed "$c1") == "$cpus1" ]] || pf_die "the earlier container's CPUs changed"
grep '"event":"CreateContainer"' "$NRI_OUT" | grep '"container":"after-nri"' | head -n1 >&2

step "second runtime handler: kata (runc underneath)"
pod_json smoke-kata smoke-uid-2 >"$PF_WORK/pod-kata.json"
podk=$(pf_crictl runp --runtime kata "$PF_WORK/pod-kata.json")
run_ctr "$podk" "$PF_WORK/pod-kata.json" on-kata >/dev/null
wait_for_event RunPodSandbox '"runtimeHandler":"kata"'
wait_for_event CreateContainer '"container":"on-kata"'
pf_log "NRI saw the pod on runtime handler kata"

step "remove pods; NRI sees Stop/Remove"
pf_crictl rmp -a -f >/dev/null
wait_for_event RemovePodSandbox '"pod":"pf-smoke/smoke"'
wait_for_event RemovePodSandbox '"pod":"pf-smoke/smoke-kata"'

step "stop containerd; check nothing is left"
started=0
"$PF_E2E_DIR/containerd.sh" stop
sleep 0.2
kill -0 "$plugin_pid" 2>/dev/null && pf_die "NRI plugin still running after containerd stopped"
wait "$plugin_pid" 2>/dev/null || true
plugin_pid=
grep -q '"event":"Closed"' "$NRI_OUT" || pf_die "NRI plugin did not see the connection close"
left=$(grep -lsF -- "$PF_CONTAINERD_SOCK" /proc/[0-9]*/cmdline | xargs -r grep -lsa containerd-shim || true)
[[ -z $left ]] || pf_die "shims left: $left"
awk -v w="$PF_WORK" 'index($5, w "/") == 1' /proc/self/mountinfo | grep -q . && pf_die "mounts left under $PF_WORK"
for d in /sys/fs/cgroup/*"$PF_CGROUP_PARENT"; do
	[[ -e $d ]] && pf_die "cgroup left: $d"
done
ok=1
