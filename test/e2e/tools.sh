#!/usr/bin/env bash
# Installs the apt packages the e2e harness needs and builds the pinned real components
# (containerd v2 + ctr + shim, runc with seccomp, crictl, crane, a sample NRI plugin) into
# ${PODFENCE_E2E_CACHE:-/var/cache/podfence-e2e}/bin. Idempotent: a tool whose stamp file
# matches its pinned version is not rebuilt. Prints one line per tool: built/cached + time.
#
# Usage: test/e2e/tools.sh [--force]     (--force rebuilds everything)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pf_require_root

force=0
[[ ${1:-} == --force ]] && force=1

APT_PACKAGES=(libseccomp-dev pkg-config busybox-static)

mkdir -p "$PF_BIN" "$PF_CACHE/stamps"
# One tools.sh at a time per cache dir.
exec 9>"$PF_CACHE/.tools.lock"
flock 9

# ---- apt -------------------------------------------------------------------------------
t0=$(pf_now_ms)
missing=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	pf_log "apt: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	mkdir -p "$PF_CACHE/logs"
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
		>"$PF_CACHE/logs/apt.log" 2>&1; then
		tail -n 20 "$PF_CACHE/logs/apt.log" >&2
		pf_die "apt-get failed (log: $PF_CACHE/logs/apt.log)"
	fi
	printf '%-28s %-7s %6ss  (%s)\n' apt-packages installed "$(pf_elapsed "$t0")" "${missing[*]}"
else
	printf '%-28s %-7s %6ss\n' apt-packages cached "$(pf_elapsed "$t0")"
fi

# ---- Go environment: private GOPATH/module cache/build cache under the cache dir --------
# Never touches the repo's go.mod; the wrapper modules in test/e2e/tools/* are separate modules.
export GOPATH=$PF_CACHE/gopath
export GOMODCACHE=$GOPATH/pkg/mod
export GOCACHE=${PODFENCE_E2E_GOCACHE:-$PF_CACHE/gocache}
export GOTOOLCHAIN=local
export GONOSUMDB=k8s.io,sigs.k8s.io
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=1
unset GOBIN GOWORK
export GOWORK=off

stage=$PF_CACHE/stage
rm -rf "$stage"
mkdir -p "$stage"
trap 'rm -rf "$stage"' EXIT

# tool NAME STAMP BINARIES... -- COMMAND...
# Runs COMMAND (which must leave BINARIES in $stage) unless the stamp matches and all
# binaries exist; then moves the binaries into $PF_BIN and writes the stamp.
tool() {
	local name=$1 stamp=$2
	shift 2
	local bins=()
	while [[ $1 != -- ]]; do
		bins+=("$1")
		shift
	done
	shift
	local sfile=$PF_CACHE/stamps/$name t0 ok=1 b
	t0=$(pf_now_ms)
	if ((!force)) && [[ -f $sfile && $(cat "$sfile") == "$stamp" ]]; then
		for b in "${bins[@]}"; do [[ -x $PF_BIN/$b ]] || ok=0; done
		if ((ok)); then
			printf '%-28s %-7s %6ss  %s\n' "$name" cached "$(pf_elapsed "$t0")" "$stamp"
			return 0
		fi
	fi
	mkdir -p "$PF_CACHE/logs"
	local blog=$PF_CACHE/logs/build-$name.log
	if ! "$@" >"$blog" 2>&1; then
		tail -n 30 "$blog" >&2
		pf_die "building $name failed (full log: $blog)"
	fi
	for b in "${bins[@]}"; do
		[[ -x $stage/$b ]] || pf_die "building $name did not produce $b"
		mv -f "$stage/$b" "$PF_BIN/$b"
	done
	printf '%s\n' "$stamp" >"$sfile"
	printf '%-28s %-7s %6ss  %s\n' "$name" built "$(pf_elapsed "$t0")" "$stamp"
}

# hash of a wrapper module's definition, so editing go.mod/go.sum/*.go rebuilds it.
modhash() { cat "$1"/go.mod "$1"/go.sum "$1"/*.go 2>/dev/null | sha256sum | cut -c1-12; }

build_containerd() {
	local v=$PF_CONTAINERD_VERSION m=github.com/containerd/containerd/v2
	GOBIN=$stage go install \
		-ldflags "-X $m/version.Version=$v -X $m/version.Package=$m" \
		"$m/cmd/containerd@$v" "$m/cmd/ctr@$v" "$m/cmd/containerd-shim-runc-v2@$v"
}

build_runc() {
	local v=$PF_RUNC_VERSION
	GOBIN=$stage go install -tags seccomp -ldflags "-X main.version=${v#v}" \
		"github.com/opencontainers/runc@$v"
}

build_crane() {
	GOBIN=$stage go install "github.com/google/go-containerregistry/cmd/crane@$PF_CRANE_VERSION"
}

build_crictl() {
	(cd "$PF_E2E_DIR/tools/crictl" && go build -ldflags \
		"-X sigs.k8s.io/cri-tools/pkg/version.Version=$PF_CRITOOLS_VERSION" \
		-o "$stage/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
}

build_nrilogger() {
	(cd "$PF_E2E_DIR/tools/nrilogger" && go build -o "$stage/pf-nri-logger" .)
}

tool containerd "containerd $PF_CONTAINERD_VERSION" containerd ctr containerd-shim-runc-v2 -- build_containerd
tool runc "runc $PF_RUNC_VERSION seccomp" runc -- build_runc
tool crane "crane $PF_CRANE_VERSION" crane -- build_crane
tool crictl "cri-tools $PF_CRITOOLS_VERSION $(modhash "$PF_E2E_DIR/tools/crictl")" crictl -- build_crictl
tool pf-nri-logger "nri $PF_NRI_VERSION $(modhash "$PF_E2E_DIR/tools/nrilogger")" pf-nri-logger -- build_nrilogger
