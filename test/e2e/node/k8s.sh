#!/usr/bin/env bash
# Builds or fetches the Kubernetes side of the node e2e into $PFN_CACHE/bin, cached:
#   kube-apiserver, kubelet, kube-scheduler, kube-controller-manager
#                            v1.31.0, built from the wrapper module tools/k8s (requires
#                            k8s.io/kubernetes v1.31.0, each staging module replaced by its
#                            v0.31.0), with the version ldflags kubectl needs to talk to them;
#                            pf-podresources (tools/k8s/podresources), a pod-resources API client
#   etcd, kubectl            Debian trixie's etcd-server and kubectl (they run on bookworm),
#                            `apt-get download` under a private apt config, `dpkg -x`
# plus the apt packages the node e2e uses (jq, openssl, curl; containernetworking-plugins:
# bridge, host-local and loopback for the webhook Deployment's pod network). A tool whose
# stamp matches is skipped; one line per tool: built/fetched/cached + seconds. Needs root (apt).
#
# Usage: test/e2e/node/k8s.sh [--force]     (--force rebuilds and refetches everything)
# Environment: PODFENCE_E2E_NODE_CACHE (default /var/cache/podfence-e2e-node).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pf_require_root

force=0
[[ ${1:-} == --force ]] && force=1

mkdir -p "$PFN_BIN" "$PFN_CACHE/stamps" "$PFN_CACHE/logs"
exec 8>"$PFN_CACHE/.k8s.lock" # one k8s.sh at a time per cache dir
flock 8

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
	printf '%-28s %-7s %6ss  (%s)\n' node-apt-packages installed "$(pf_elapsed "$t0")" "${missing[*]}"
else
	printf '%-28s %-7s %6ss\n' node-apt-packages cached "$(pf_elapsed "$t0")"
fi

# tool NAME STAMP BINARIES... -- COMMAND...: as test/e2e/tools.sh: runs COMMAND (which leaves
# BINARIES in $stage) unless the stamp matches and every binary exists.
tool() {
	local name=$1 stamp=$2 verb=built
	shift 2
	local bins=() b ok=1 t0 sfile=$PFN_CACHE/stamps/$name
	while [[ $1 != -- ]]; do
		bins+=("$1")
		shift
	done
	shift
	t0=$(pf_now_ms)
	if ((!force)) && [[ -f $sfile && $(cat "$sfile") == "$stamp" ]]; then
		for b in "${bins[@]}"; do [[ -x $PFN_BIN/$b ]] || ok=0; done
		if ((ok)); then
			printf '%-28s %-7s %6ss  %s\n' "$name" cached "$(pf_elapsed "$t0")" "$stamp"
			return 0
		fi
	fi
	local blog=$PFN_CACHE/logs/build-$name.log
	if ! "$@" >"$blog" 2>&1; then
		tail -n 30 "$blog" >&2
		pf_die "building $name failed (full log: $blog)"
	fi
	for b in "${bins[@]}"; do
		[[ -x $stage/$b ]] || pf_die "building $name did not produce $b"
		mv -f "$stage/$b" "$PFN_BIN/$b"
	done
	printf '%s\n' "$stamp" >"$sfile"
	[[ $name == debian-* ]] && verb=fetched
	printf '%-28s %-7s %6ss  %s\n' "$name" "$verb" "$(pf_elapsed "$t0")" "$stamp"
}

# ---- kube-apiserver, kubelet and kube-scheduler from the wrapper module --------------------
# k8s_go ARGS...: `go ARGS` in the wrapper module, with the cache's GOPATH and build cache,
# static (CGO_ENABLED=0); K8S_LDFLAGS: the version stamps kubectl and the components check.
k8s_go() {
	(
		export GOPATH=$PFN_CACHE/gopath GOMODCACHE=$PFN_CACHE/gopath/pkg/mod
		export GOCACHE=${PODFENCE_E2E_NODE_GOCACHE:-$PFN_CACHE/gocache}
		export GOTOOLCHAIN=local GONOSUMDB=k8s.io,sigs.k8s.io GOFLAGS="-buildvcs=false -mod=mod" GOWORK=off
		export CGO_ENABLED=0
		unset GOBIN
		cd "$PFN_DIR/tools/k8s"
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

build_k8s() {
	k8s_go build -ldflags "$K8S_LDFLAGS" -o "$stage/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver &&
		k8s_go build -ldflags "$K8S_LDFLAGS" -o "$stage/kubelet" k8s.io/kubernetes/cmd/kubelet &&
		k8s_go build -o "$stage/pf-podresources" ./podresources
}

# kube-scheduler, for the scheduler-extender checks: its own tool (and stamp), so that adding
# it did not rebuild the other two.
build_scheduler() {
	k8s_go build -ldflags "$K8S_LDFLAGS" -o "$stage/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
}

# kube-controller-manager, for the whole run (DaemonSet, Deployment, ServiceAccount, Endpoints and
# node lifecycle controllers): its own tool and stamp, as kube-scheduler.
build_controller_manager() {
	k8s_go build -ldflags "$K8S_LDFLAGS" -o "$stage/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
}

# ---- etcd and kubectl from Debian trixie -------------------------------------------------
# A private apt config: its own sources (trixie only), lists, archives and an empty dpkg
# status (so the host's installed packages, such as another kubectl, do not pin versions).
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
	(cd "$apt/deb" && apt-get "${o[@]}" download etcd-server kubectl)
	d=$stage/root
	for deb in "$apt/deb"/*.deb; do
		dpkg-deb --info "$deb" control | sed -n 's/^ \(Package\|Version\): /\1 /p'
		dpkg -x "$deb" "$d"
	done
	cp "$d/usr/bin/etcd" "$d/usr/bin/kubectl" "$stage/"
	"$stage/etcd" --version
	"$stage/kubectl" version --client
}

# hash of the wrapper module (go.mod, go.sum, every .go file), so editing it rebuilds.
modhash() { (cd "$1" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12); }

tool kubernetes "kubernetes $PFN_K8S_VERSION $(modhash "$PFN_DIR/tools/k8s")" kube-apiserver kubelet pf-podresources -- build_k8s
tool kube-scheduler "kube-scheduler $PFN_K8S_VERSION $(modhash "$PFN_DIR/tools/k8s")" kube-scheduler -- build_scheduler
tool kube-controller-manager "kube-controller-manager $PFN_K8S_VERSION $(modhash "$PFN_DIR/tools/k8s")" kube-controller-manager -- build_controller_manager
tool debian-etcd-kubectl "debian $PFN_DEBIAN_SUITE etcd-server kubectl" etcd kubectl -- fetch_debian
