#!/usr/bin/env bash
# `make e2e`: the podfence node agent end to end on a real containerd v2 with NRI, runc and
# the kernel of this machine. Needs root.
#
#   1. tools (test/e2e/tools.sh, cached) and a static podfence (CGO_ENABLED=0);
#   2. a private containerd (test/e2e/containerd.sh), `podfence agent` connected to its NRI socket;
#   3. pools fitted to this machine from /sys/devices/system/cpu/online: the highest online
#      CPU (X) makes the pool, every other CPU stays in the default pool. The exclusive-pool
#      checks have an exclusive pool on X (poolconfig-exclusive.yaml), the shared-pool checks
#      a shared pool on X (poolconfig-shared.yaml; on 2 CPUs the default pool keeps CPU 0, so
#      only one more pool fits); between them all pods go and the agent restarts with the
#      other config; the VM-sandbox checks (vm.sh) and the SGX EPC checks follow on the
#      shared pool config;
#   4. pods through crictl, each container checked from the kernel: its cgroup's cpuset.cpus
#      and CFS quota/period (found from /proc/<pid>/cgroup), /proc/<pid>/status
#      Cpus_allowed_list, /proc/<pid>/cmdline, its env (crictl exec env); refusals from
#      crictl's error; restarts of the agent and of containerd must move nothing.
#
# Output: one `PASS <what>: <facts>` / `FAIL <what>: <want/got>` line per check on stdout,
# progress on stderr, and last `e2e: N passed, M failed`. Exits non-zero on any failure,
# after printing the agent's and containerd's log tails. Cleans up everything on exit.
#
# Environment: as test/e2e/lib.sh, with its own defaults so that it does not collide with
# test/e2e/smoke.sh: PODFENCE_E2E_WORK=/tmp/pf-e2e-agent, PODFENCE_E2E_CGROUP_PARENT=/podfence-e2e-agent.
# PODFENCE_E2E_KEEP=1 keeps the run dir (agent binary, log, checkpoint, pod JSON).
set -euo pipefail
[ "$(id -u)" = 0 ] || {
	echo "e2e needs root (it runs containerd, creates cgroups and mounts)"
	exit 1
}
export PODFENCE_E2E_WORK=${PODFENCE_E2E_WORK:-/tmp/pf-e2e-agent}
export PODFENCE_E2E_CGROUP_PARENT=${PODFENCE_E2E_CGROUP_PARENT:-/podfence-e2e-agent}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/checks.sh"
. "$(dirname "$0")/vm.sh"

# One run per work dir at a time: a second `make e2e` (another checkout, CI) waits here
# instead of wiping this one's containerd.
# (fd 9 is closed for the long-lived children, containerd and the agent, so that a leaked one
# cannot hold the lock.)
LOCK=/run/lock/podfence-e2e-$(printf '%s' "$PF_WORK" | cksum | cut -d' ' -f1).lock
[[ -d /run/lock ]] || LOCK=/tmp/${LOCK#/run/lock/}
exec 9>"$LOCK"
if ! flock -n 9; then
	pf_log "another e2e run uses $PF_WORK; waiting for it (lock $LOCK)"
	flock -w 900 9 || pf_die "still locked after 15 min: $LOCK"
fi

T0=$(pf_now_ms)
NS=pf-e2e
RUN=$(mktemp -d /tmp/pf-e2e-run.XXXXXX)
AGENT_LOG=$RUN/agent.log
AGENT_PID="" AGENT_OFF=0 started=0 finished=0

step() { pf_log "== $*"; }

# --- the agent ----------------------------------------------------------------------------

# agent_start POOLS [FLAG...]: starts `podfence agent` on the NRI socket with this pool config
# (and any further flags) and waits for its first Synchronize. AGENT_OFF is the log offset of
# this start.
agent_start() {
	AGENT_OFF=$(log_lines)
	"$RUN/podfence" agent --nri-socket "$PODFENCE_E2E_NRI_SOCKET" --pools "$1" --node-name e2e \
		--checkpoint-dir "$RUN/checkpoint" --start-binary "$RUN/podfence" --metrics-auth none "${@:2}" \
		</dev/null >>"$AGENT_LOG" 2>&1 9>&- &
	AGENT_PID=$!
	if ! wait_log "$AGENT_OFF" 'msg=synchronized' 20 >/dev/null; then
		fail "agent start ($1)" "no msg=synchronized within 20s; agent $(kill -0 "$AGENT_PID" 2>/dev/null && echo running || echo exited)"
		return 1
	fi
	pf_log "agent up (pid $AGENT_PID, pools $(basename "$1"))"
}

# agent_stop: SIGTERM (SIGKILL after 10 s) and reap.
agent_stop() {
	[[ -n $AGENT_PID ]] || return 0
	kill -TERM "$AGENT_PID" 2>/dev/null || true
	for _ in $(seq 1 100); do
		kill -0 "$AGENT_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$AGENT_PID" 2>/dev/null; then
		pf_log "agent did not stop on SIGTERM; killing"
		kill -KILL "$AGENT_PID" 2>/dev/null || true
	fi
	wait "$AGENT_PID" 2>/dev/null || true
	AGENT_PID=""
}

# --- clean-up and summary -----------------------------------------------------------------

# leftovers: what this run could leave behind, one line each (empty: nothing).
leftovers() {
	local d
	pf_containerd_running && echo "containerd $(cat "$PF_CONTAINERD_PID")"
	grep -lsF -- "$PF_CONTAINERD_SOCK" /proc/[0-9]*/cmdline | xargs -r grep -lsa containerd-shim | sed 's/^/shim /'
	find /proc/[0-9]*/exe -maxdepth 0 -lname "$RUN/podfence*" 2>/dev/null | sed 's/^/agent /'
	awk -v w="$PF_WORK" -v r="$RUN" 'index($5, w "/") == 1 || $5 == w || index($5, r "/") == 1 {print "mount " $5}' /proc/self/mountinfo
	for d in /sys/fs/cgroup/*"$PF_CGROUP_PARENT"; do
		[[ -e $d ]] && echo "cgroup $d"
	done
	return 0
}

on_exit() {
	local rc=$? left
	trap - EXIT INT TERM
	((finished)) || fail "run" "aborted before the end (exit $rc); see the log tails"
	if ((FAILED > 0 || rc != 0)); then
		if [[ -f $AGENT_LOG ]]; then
			echo "---- last 40 lines of the agent log ($AGENT_LOG) ----" >&2
			tail -n 40 "$AGENT_LOG" >&2
			echo "----" >&2
		fi
		pf_log_tail 40
	fi
	step "clean-up"
	if pf_containerd_running; then pf_crictl rmp -a -f >/dev/null 2>&1 || true; fi
	agent_stop
	if ((started)); then "$PF_E2E_DIR/containerd.sh" stop >&2 || true; fi
	if [[ -f $AGENT_LOG && -d $PF_WORK ]]; then cp "$AGENT_LOG" "$PF_WORK/agent.log"; fi
	if [[ ${PODFENCE_E2E_KEEP:-0} != 1 ]]; then rm -rf "$RUN"; fi
	left=$(leftovers)
	if [[ -z $left ]]; then
		pass "clean-up" "no containerd, shim, agent, mount under $PF_WORK or cgroup $PF_CGROUP_PARENT left"
	else
		fail "clean-up" "left behind: $(tr '\n' ';' <<<"$left")"
	fi
	pf_log "e2e finished in $(pf_elapsed "$T0")s (logs: $PF_WORK/agent.log, $PF_CONTAINERD_LOG)"
	echo "e2e: $PASSED passed, $FAILED failed"
	((FAILED == 0)) || exit 1
	exit 0
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- setup --------------------------------------------------------------------------------

step "tools (cached) and a static podfence"
"$PF_E2E_DIR/tools.sh" >&2
t=$(pf_now_ms)
(cd "$PF_E2E_DIR/../.." && CGO_ENABLED=0 go build -tags grpcnotrace -o "$RUN/podfence" ./cmd/podfence) ||
	pf_die "CGO_ENABLED=0 go build ./cmd/podfence failed"
pf_log "podfence built in $(pf_elapsed "$t")s"

# Pools fitted to this machine: X is the highest online CPU, the rest is the default pool.
ONLINE=$(cpulist_norm "$(cat /sys/devices/system/cpu/online)")
X=$(cpulist_expand "$ONLINE" | tail -n1)
DEF=$(cpulist_expand "$ONLINE" | grep -vx "$X" | cpulist_compress)
[[ -n $DEF ]] || pf_die "one online CPU ($ONLINE): need at least 2 (the default pool plus one more)"
cat >"$RUN/poolconfig-exclusive.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  exclusive_a: {cpus: "$X", hyperThreadingPolicy: multiThreaded}
EOF
cat >"$RUN/poolconfig-shared.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  shared_s: {cpus: "$X"}
EOF
pf_log "online CPUs $ONLINE: default pool $DEF; exclusive pool checks exclusive_a=$X, shared pool checks shared_s=$X"

step "containerd with NRI"
started=1
env=$("$PF_E2E_DIR/containerd.sh" start 9>&-) || pf_die "test/e2e/containerd.sh start failed"
eval "$env"

EXCL1='{"app": {"exclusive_a": 1}}'
PIN='[{"container":"app","processes":[{"process":"/bin/sleep","args":["3600"],"pool":"exclusive_a","cpus":1}]}]'
PIN2='[{"container":"app","processes":[{"process":"/bin/sleep","args":["3600"],"pool":"exclusive_a","cpus":2}]}]'
REFUSED='refused \(NotEnoughCPUs\).*not enough (whole )?free (CPUs|cores)'

# --- exclusive pool: default + exclusive_a -------------------------------------------------

step "exclusive pool: pools default=$DEF exclusive_a=$X"
agent_start "$RUN/poolconfig-exclusive.yaml"
expect_log "agent start (exclusive pool config): pools fitted to this machine" "$AGENT_OFF" "msg=node .*pools=\"default=$DEF exclusive_a=$X\""
expect_log "agent start (exclusive pool config): connected and synchronized" "$AGENT_OFF" 'msg=synchronized containers=0 '

launch def
expect_ctr "default-pool container" def \
	cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1 env:EXCLUSIVE_CPUS='<unset>' env:SHARED_CPUS='<unset>'

# --cfs-quotas all (the default, as CPU-Pooler's): an exclusive container's quota is its CPUs
# plus 100 millicpu, so the kernel never throttles it.
launch excl "pod:podfence.io/cpu-pools=$EXCL1"
expect_ctr "exclusive via pod annotation cpu-pools" excl \
	cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=110000 env:EXCLUSIVE_CPUS="$X" env:CPU_POOLS=exclusive env:SHARED_CPUS='<unset>'

off=$(log_lines)
# (The agent guards the cpuset and the quota of an exclusive container.)
update excl --cpuset-cpus "$ONLINE"
expect_log "resource update widening the exclusive cpuset: the agent keeps its settings" "$off" \
	"msg=\"kept CPU settings against a resource update\" pod=$NS/excl container=app asked=\"cpus=$ONLINE[ \"]"
expect_ctr "resource update: the exclusive container stays on CPU $X" excl \
	cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=110000

off=$(log_lines)
expect_refused "second exclusive request while CPU $X is held: refused" excl-2 "$REFUSED" "pod:podfence.io/cpu-pools=$EXCL1"
expect_log "second exclusive request: the agent logs the refusal" "$off" "level=WARN msg=refused pod=$NS/excl-2 container=app"

expect_refused "bad cpu-pools annotation: refused, naming the annotation" bad \
	'annotation podfence\.io/cpu-pools=.{0,2}\{not json.*want JSON' 'pod:podfence.io/cpu-pools={not json'
def_pid=$(ctr_pid def || true) excl_pid=$(ctr_pid excl || true)
expect_ctr "bad annotation: default-pool container untouched" def pid="$def_pid" cpuset.cpus="$DEF" Cpus_allowed_list="$DEF"
expect_ctr "bad annotation: exclusive container untouched" excl pid="$excl_pid" cpuset.cpus="$X" Cpus_allowed_list="$X"

off=$(log_lines)
remove excl
expect_log "exclusive pod removed: CPU $X released" "$off" "msg=released pod=$NS/excl container=app pool=exclusive_a cpus=$X"

launch excl-ctr "ctr:podfence.io/exclusive-cpus=$X"
expect_ctr "exclusive via container annotation exclusive-cpus=$X" excl-ctr \
	cpuset.cpus="$X" Cpus_allowed_list="$X" env:EXCLUSIVE_CPUS="$X"

# --- restarts: nothing moves --------------------------------------------------------------

step "agent restart with containers running"
n=$(running_containers)
def_pid=$(ctr_pid def || true) excl_pid=$(ctr_pid excl-ctr || true)
off=$(log_lines)
agent_stop
expect_log "agent stop: clean shutdown" "$off" 'msg=stopped' 1
agent_start "$RUN/poolconfig-exclusive.yaml"
expect_log "agent restart: state restored from the checkpoint" "$AGENT_OFF" \
	"msg=synchronized containers=$n derived=$n restored=0 adopted=0 unmanaged=0 dropped=0"
expect_ctr "agent restart: default-pool container did not move" def pid="$def_pid" cpuset.cpus="$DEF" Cpus_allowed_list="$DEF"
expect_ctr "agent restart: exclusive container did not move" excl-ctr \
	pid="$excl_pid" cpuset.cpus="$X" Cpus_allowed_list="$X" env:EXCLUSIVE_CPUS="$X"

step "containerd restart with containers running (the agent keeps running)"
off=$(log_lines)
if env=$("$PF_E2E_DIR/containerd.sh" restart 9>&-); then
	eval "$env"
else
	fail "containerd restart" "test/e2e/containerd.sh restart failed"
fi
expect_log "containerd restart: the agent sees the connection drop" "$off" 'msg="lost connection to runtime; reconnecting"'
expect_log "containerd restart: the agent reconnects" "$off" 'msg="connected to runtime"' 20
expect_log "containerd restart: the agent resynchronizes, keeping every allocation" "$off" \
	"msg=synchronized containers=$n derived=$n restored=0 adopted=0 unmanaged=0 dropped=0" 20
expect_ctr "containerd restart: default-pool container did not move" def pid="$def_pid" cpuset.cpus="$DEF" Cpus_allowed_list="$DEF"
expect_ctr "containerd restart: exclusive container did not move" excl-ctr \
	pid="$excl_pid" cpuset.cpus="$X" Cpus_allowed_list="$X" env:EXCLUSIVE_CPUS="$X"

expect_refused "after both restarts: CPU $X still held, a new exclusive request is refused" excl-3 "$REFUSED" \
	"pod:podfence.io/cpu-pools=$EXCL1"
off=$(log_lines)
remove excl-ctr
expect_log "after both restarts: removing the holder releases CPU $X" "$off" "msg=released pod=$NS/excl-ctr container=app .*cpus=$X"
launch excl-4 "pod:podfence.io/cpu-pools=$EXCL1"
expect_ctr "after both restarts: the exclusive request succeeds once CPU $X is free" excl-4 \
	cpuset.cpus="$X" Cpus_allowed_list="$X" env:EXCLUSIVE_CPUS="$X"
remove excl-4

# --- process pinning ----------------------------------------------------------------------

step "process pinning (podfence.io/cpus)"
launch pin "pod:podfence.io/cpu-pools=$EXCL1" "pod:podfence.io/cpus=$PIN"
expect_ctr "process pinning: the container's PID 1 is the pinned process, on CPU $X" pin \
	NSpid=1 cmdline="/bin/sleep 3600" Cpus_allowed_list="$X" cpuset.cpus="$X" env:EXCLUSIVE_CPUS="$X"
expect_ctr "process pinning: started through the read-only wrapper" pin \
	mount:/.podfence/podfence=ro spec.args="/.podfence/podfence start -- sleep 86400"
remove pin
expect_refused "process pinning asking for more CPUs than allocated: refused" pin-2 'process pinning' \
	"pod:podfence.io/cpu-pools=$EXCL1" "pod:podfence.io/cpus=$PIN2"
launch excl-5 "pod:podfence.io/cpu-pools=$EXCL1"
expect_ctr "refused pinning did not leak CPU $X: the next exclusive request gets it" excl-5 \
	cpuset.cpus="$X" Cpus_allowed_list="$X" env:EXCLUSIVE_CPUS="$X"

# --- shared pool: default + shared_s -------------------------------------------------------

step "shared pool: remove all pods, restart the agent with pools default=$DEF shared_s=$X"
off=$(log_lines)
pf_crictl rmp -a -f >/dev/null
expect_log "all pods removed: the default-pool container is released" "$off" "msg=released pod=$NS/def container=app"
POD=() CID=()
agent_stop
agent_start "$RUN/poolconfig-shared.yaml"
expect_log "agent start (shared pool config): checkpoint empty after all pods went" "$AGENT_OFF" 'msg=checkpoint .*records=0'
expect_log "agent start (shared pool config): pools fitted to this machine" "$AGENT_OFF" "msg=node .*pools=\"default=$DEF shared_s=$X\""

launch def-b
expect_ctr "default-pool container beside the shared pool" def-b \
	cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1 env:SHARED_CPUS='<unset>'
launch shr "pod:podfence.io/cpu-pools={\"app\": {\"shared_s\": 500}}"
expect_ctr "shared pool, 500 millicpu" shr cpuset.cpus="$X" Cpus_allowed_list="$X" \
	cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000 env:SHARED_CPUS="$X" env:EXCLUSIVE_CPUS='<unset>'
launch shr-2 'pod:podfence.io/cpu-pools={"app": {"podfence.io/shared_s": "250"}}'
expect_ctr "shared pool, second container (250 millicpu, resource name, string amount)" shr-2 \
	cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=25000 cpu.cfs_period_us=100000 env:SHARED_CPUS="$X"

off=$(log_lines)
update shr --cpuset-cpus "$ONLINE" --cpu-quota 200000 --cpu-period 100000
expect_log "resource update raising the shared quota: the agent keeps its settings" "$off" \
	"msg=\"kept CPU settings against a resource update\" pod=$NS/shr container=app"
expect_ctr "resource update: the shared container keeps cpuset $X and its 500m quota" shr \
	cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000

step "agent restart with shared containers running"
n=$(running_containers)
shr_pid=$(ctr_pid shr || true)
agent_stop
agent_start "$RUN/poolconfig-shared.yaml"
expect_log "agent restart with shared containers: state restored from the checkpoint" "$AGENT_OFF" \
	"msg=synchronized containers=$n derived=$n restored=0 adopted=0 unmanaged=0 dropped=0"
expect_ctr "agent restart with shared containers: the shared container kept its cpuset and quota" shr \
	pid="$shr_pid" cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000

# --- VM sandboxes: host cgroups for runtime handler kata (vm.sh) ----------------------------

prove_vm_sandbox_cgroups

# --- SGX EPC limits on a kernel that cannot enforce them -----------------------------------

step "SGX EPC limits (this kernel has no misc controller): strict, then best-effort"
pf_crictl rmp -a -f >/dev/null
POD=() CID=()
agent_stop
agent_start "$RUN/poolconfig-shared.yaml"
expect_log "agent start (EPC checks): the EPC probe reports no sgx_epc" "$AGENT_OFF" 'SGX EPC.*(no misc controller|lists no sgx_epc)'
expect_refused "EPC limit under policy strict: refused, the kernel lacks SGX EPC cgroup support" epc-strict \
	'lacks SGX EPC cgroup support' 'pod:epc-limit.nri.io/container.app=1048576'
agent_stop
agent_start "$RUN/poolconfig-shared.yaml" --epc-policy best-effort
off=$(log_lines)
launch epc-be 'pod:epc-limit.nri.io/container.app=1Mi' || pf_log "launch epc-be failed: ${LAUNCH_ERR[epc-be]:-}"
expect_ctr "EPC limit under policy best-effort: the container runs on its pool" epc-be \
	cpuset.cpus="$DEF" Cpus_allowed_list="$DEF"
expect_log "EPC limit under policy best-effort: reported as not enforced" "$off" \
	"msg=\"SGX EPC limit not enforced\" pod=$NS/epc-be container=app"

finished=1
