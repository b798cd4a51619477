#!/usr/bin/env bash
# Builds or fetches the Kubernetes side of the node e2e, cached, for the release under test
# (PODFENCE_E2E_K8S_VERSION, lib.sh; default v1.37.2):
#   kube-apiserver, kubelet, kube-scheduler, kube-controller-manager, kubectl
#                            built from the release's wrapper module tools/k8s-v<major>.<minor>
#                            (requires k8s.io/kubernetes at the release, each staging module
#                            replaced by its published v0.<minor>.<patch>) with the version
#                            ldflags kubectl and the components check, into
#                            $PFN_CACHE/<version>/bin: each release its own binaries and stamps,
#                            so switching releases rebuilds neither; kubectl from the same module,
#                            so that it is never out of version skew
#   pf-podresources          tools/podresources, a pod-resources API (v1) client, any release
#   etcd                     Debian trixie's etcd-server (it runs on bookworm), `apt-get
#                            download` under a private apt config, `dpkg -x`
# the last two into $PFN_CACHE/shared/bin; plus the apt packages the node e2e uses (jq, openssl,
# curl; containernetworking-plugins: bridge, host-local and loopback for the webhook
# Deployment's pod network). A tool whose stamp matches is skipped; one line per tool:
# built/fetched/cached + seconds. Needs root (apt).
#
# Usage: test/e2e/node/k8s.sh [--force]     (--force rebuilds and refetches everything)
# Environment: as lib.sh (PODFENCE_E2E_K8S_VERSION, PODFENCE_E2E_NODE_CACHE, ...).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pf_require_root
pfn_k8s_version_check

force=0
[[ ${1:-} == --force ]] && force=1

K8S_CACHE=$PFN_CACHE/$PFN_K8S_VERSION SHARED_CACHE=$PFN_CACHE/shared
mkdir -p "$K8S_CACHE/bin" "$K8S_CACHE/stamps" "$SHARED_CACHE/bin" "$SHARED_CACHE/stamps" "$PFN_CACHE/logs"
exec 8>"$PFN_CACHE/.k8s.lock" # one k8s.sh at a time per cache dir
flock 8
# The layout before one dir per release: bin/ and stamps/ held v1.31.0's binaries.
rm -rf "${PFN_CACHE:?}/bin" "$PFN_CACHE/stamps"

stage=$PFN_CACHE/stage
rm -rf "$stage"
mkdir -p "$stage"
trap 'rm -rf "$stage"' EXIT

# ---- apt packages ----------------------------------------------------------------------
APT_PACKAGES=(jq openssl curl util-linux containernetworking-plugins)
t0=$(pf_now_ms)
missing=()
for p in "${APT_PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
		>"$PFN_CACHE/logs/apt.log" 2>&1; then
		tail -n 20 "$PFN_CACHE/logs/apt.log" >&2
		pf_die "apt-get failed (log: $PFN_CACHE/logs/apt.log)"
	fi
	printf '%-34s %-7s %6ss  (%s)\n' node-apt-packages installed "$(pf_elapsed "$t0")" "${missing[*]}"
else
	printf '%-34s %-7s %6ss\n' node-apt-packages cached "$(pf_elapsed "$t0")"
fi

# tool DIR NAME STAMP BINARIES... -- COMMAND...: as test/e2e/tools.sh: runs COMMAND (which
# leaves BINARIES in $stage) unless DIR/stamps/NAME holds STAMP and every binary is in DIR/bin.
tool() {
	local dir=$1 name=$2 stamp=$3 verb=built
	shift 3
	local bins=() b ok=1 t0 sfile=$dir/stamps/$name label
	label=$(basename "$dir")/$name
	while [[ $1 != -- ]]; do
		bins+=("$1")
		shift
	done
	shift
	t0=$(pf_now_ms)
	if ((!force)) && [[ -f $sfile && $(cat "$sfile") == "$stamp" ]]; then
		for b in "${bins[@]}"; do [[ -x $dir/bin/$b ]] || ok=0; done
		if ((ok)); then
			printf '%-34s %-7s %6ss  %s\n' "$label" cached "$(pf_elapsed "$t0")" "$stamp"
			return 0
		fi
	fi
	local blog=$PFN_CACHE/logs/build-${label//\//-}.log
	if ! "$@" >"$blog" 2>&1; then
		tail -n 30 "$blog" >&2
		pf_die "building $label failed (full log: $blog)"
	fi
	for b in "${bins[@]}"; do
		[[ -x $stage/$b ]] || pf_die "building $label did not produce $b"
		mv -f "$stage/$b" "$dir/bin/$b"
	done
	printf '%s\n' "$stamp" >"$sfile"
	[[ $name == debian-* ]] && verb=fetched
	printf '%-34s %-7s %6ss  %s\n' "$label" "$verb" "$(pf_elapsed "$t0")" "$stamp"
}

# ---- the release's components from its wrapper module -------------------------------------
# k8s_go DIR ARGS...: `go ARGS` in module DIR, with the cache's GOPATH and build cache, static
# (CGO_ENABLED=0); K8S_LDFLAGS: the version stamps kubectl and the components check.
k8s_go() {
	local dir=$1
	shift
	(
		export GOPATH=$PFN_CACHE/gopath GOMODCACHE=$PFN_CACHE/gopath/pkg/mod
		export GOCACHE=${PODFENCE_E2E_NODE_GOCACHE:-$PFN_CACHE/gocache}
		export GOTOOLCHAIN=local GONOSUMDB=k8s.io,sigs.k8s.io GOFLAGS="-buildvcs=false -mod=mod" GOWORK=off
		export CGO_ENABLED=0
		unset GOBIN
		cd "$dir"
		go "$@"
	)
}
k8s_ldflags() {
	local m=k8s.io/component-base/version v=$PFN_K8S_VERSION major minor
	major=${v#v}
	minor=${major#*.} major=${major%%.*} minor=${minor%%.*}
	K8S_LDFLAGS="-s -w -X $m.gitVersion=$v -X $m.gitMajor=$major -X $m.gitMinor=$minor -X $m.gitTreeState=clean"
}
k8s_ldflags

# build_cmd NAME...: k8s.io/kubernetes/cmd/NAME for each NAME, into $stage.
build_cmd() {
	local c
	for c in "$@"; do
		k8s_go "$PFN_K8S_MODULE" build -ldflags "$K8S_LDFLAGS" -o "$stage/$c" "k8s.io/kubernetes/cmd/$c" || return
	done
}

build_podresources() { k8s_go "$PFN_DIR/tools/podresources" build -ldflags "-s -w" -o "$stage/pf-podresources" .; }

# ---- etcd from Debian trixie ---------------------------------------------------------------
# A private apt config: its own sources (trixie only), lists, archives and an empty dpkg
# status (so the host's installed packages do not pin versions).
fetch_debian() {
	local apt=$PFN_CACHE/apt deb d
	mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/deb"
	printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
		"$PFN_DEBIAN_MIRROR" "$PFN_DEBIAN_SUITE" >"$apt/sources.list"
	: >"$apt/status"
	local -a o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::Cache::Archives=$apt/archives"
		-o "Dir::State::Status=$apt/status" -o Dir::Etc::Preferences=/dev/null
		-o Dir::Etc::PreferencesParts=/dev/null -o APT::Sandbox::User=root)
	apt-get "${o[@]}" update
	rm -f "$apt/deb"/*.deb
	(cd "$apt/deb" && apt-get "${o[@]}" download etcd-server)
	d=$stage/root
	for deb in "$apt/deb"/*.deb; do
		dpkg-deb --info "$deb" control | sed -n 's/^ \(Package\|Version\): /\1 /p'
		dpkg -x "$deb" "$d"
	done
	cp "$d/usr/bin/etcd" "$stage/"
	"$stage/etcd" --version
}

# hash of a module (go.mod, go.sum, every .go file), so editing it rebuilds.
modhash() { (cd "$1" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12); }

v=$PFN_K8S_VERSION h=$(modhash "$PFN_K8S_MODULE")
tool "$K8S_CACHE" kubernetes "kubernetes $v $h" kube-apiserver kubelet -- build_cmd kube-apiserver kubelet
tool "$K8S_CACHE" kube-scheduler "kube-scheduler $v $h" kube-scheduler -- build_cmd kube-scheduler
tool "$K8S_CACHE" kube-controller-manager "kube-controller-manager $v $h" kube-controller-manager -- build_cmd kube-controller-manager
tool "$K8S_CACHE" kubectl "kubectl $v $h" kubectl -- build_cmd kubectl
tool "$SHARED_CACHE" pf-podresources "pf-podresources $(modhash "$PFN_DIR/tools/podresources")" pf-podresources -- build_podresources
tool "$SHARED_CACHE" debian-etcd "debian $PFN_DEBIAN_SUITE etcd-server" etcd -- fetch_debian
