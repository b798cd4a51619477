# shellcheck shell=bash
# shellcheck disable=SC2034 # variables used by the scripts that source this file
# Common settings and helpers for the podfence e2e harness.
# Source it from bash scripts: `. "$(dirname "$0")/lib.sh"`.
#
# Environment (all optional):
#   PODFENCE_E2E_CACHE  cache for built tools and image tarballs (default /var/cache/podfence-e2e)
#   PODFENCE_E2E_WORK   per-run work dir: containerd root/state/sockets/logs (default /tmp/pf-e2e)
#   PODFENCE_E2E_CGROUP_PARENT  cgroup parent the harness's pods use (default /podfence-e2e)

# Pinned versions. Bump here; tools.sh rebuilds whatever's stamp differs.
PF_CONTAINERD_VERSION=v2.4.2
PF_RUNC_VERSION=v1.5.2
PF_CRANE_VERSION=v0.22.1
PF_CRITOOLS_VERSION=v1.34.0 # also in test/e2e/tools/crictl/go.mod
PF_NRI_VERSION=v0.12.3      # containerd v2.4.2's NRI; also in test/e2e/tools/nrilogger/go.mod

PF_E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PF_CACHE=${PODFENCE_E2E_CACHE:-/var/cache/podfence-e2e}
PF_BIN=$PF_CACHE/bin
PF_IMAGES=$PF_CACHE/images
PF_WORK=${PODFENCE_E2E_WORK:-/tmp/pf-e2e}
PF_CGROUP_PARENT=${PODFENCE_E2E_CGROUP_PARENT:-/podfence-e2e}

# Paths inside the work dir (a Go test can rely on these names).
PF_CONTAINERD_SOCK=$PF_WORK/containerd.sock
PF_NRI_SOCK=$PF_WORK/nri.sock
PF_CONTAINERD_LOG=$PF_WORK/containerd.log
PF_CONTAINERD_PID=$PF_WORK/containerd.pid
PF_CONTAINERD_CONFIG=$PF_WORK/containerd.toml
PF_CRICTL_CONFIG=$PF_WORK/crictl.yaml

# Local image names (imported into containerd's k8s.io namespace).
PF_BUSYBOX_IMAGE=localhost/podfence-e2e/busybox:latest
PF_PAUSE_IMAGE=localhost/podfence-e2e/pause:latest

export PATH="$PF_BIN:$PATH"

pf_log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
pf_die() {
	pf_log "FAIL: $*"
	exit 1
}

# pf_now_ms: milliseconds since the epoch.
pf_now_ms() { date +%s%3N; }

# pf_require_root: the harness mounts, creates cgroups and runs containerd.
pf_require_root() {
	[[ $(id -u) -eq 0 ]] || pf_die "must run as root"
}

# pf_ctr ARGS...: ctr against the private containerd, CRI namespace.
pf_ctr() { ctr --address "$PF_CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# pf_crictl ARGS...: crictl against the private containerd.
pf_crictl() { crictl --config "$PF_CRICTL_CONFIG" "$@"; }

# pf_containerd_running: true if the containerd started by this harness is alive: the pid
# in the pid file runs containerd with our config (so a reused pid is never taken for it)
# and is not a zombie.
pf_containerd_running() {
	local pid state
	[[ -f $PF_CONTAINERD_PID ]] || return 1
	pid=$(cat "$PF_CONTAINERD_PID")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	grep -qsaF -- "$PF_CONTAINERD_CONFIG" "/proc/$pid/cmdline" || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# pf_log_tail [N]: the last N lines of containerd's log, for failure reports.
pf_log_tail() {
	local n=${1:-40}
	if [[ -f $PF_CONTAINERD_LOG ]]; then
		echo "---- last $n lines of $PF_CONTAINERD_LOG ----" >&2
		tail -n "$n" "$PF_CONTAINERD_LOG" >&2
		echo "----" >&2
	fi
}

# pf_elapsed T0_MS: seconds since T0_MS with one decimal, e.g. "12.3".
pf_elapsed() {
	local d=$(($(pf_now_ms) - $1))
	printf '%d.%d' $((d / 1000)) $((d % 1000 / 100))
}
