# shellcheck shell=bash
# shellcheck disable=SC2034 # variables used by the scripts that source this file
# Settings for the node e2e (test/e2e/node/*.sh), on top of the containerd harness's test/e2e/lib.sh.
#
# Environment (all optional):
#   PODFENCE_E2E_K8S_VERSION  the Kubernetes release to run (default v1.37.2); one of the
#                             versions the wrapper modules tools/k8s-v<major>.<minor> pin
#                             (pfn_k8s_versions lists them: v1.31.0, v1.37.2)
#   PODFENCE_E2E_NODE_CACHE   the Kubernetes binaries, etcd and their build caches
#                             (default /var/cache/podfence-e2e-node, beside test/e2e/lib.sh's cache)
#   PODFENCE_E2E_NODE_GOCACHE Go build cache for the Kubernetes build (default <cache>/gocache)
#   PODFENCE_E2E_DEBIAN_MIRROR  Debian mirror for trixie's etcd-server
#                             (default http://deb.debian.org/debian)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# Pinned versions. Each Kubernetes release is built from its wrapper module
# tools/k8s-v<major>.<minor> (its go.mod pins the patch release) into its own cache dir.
PFN_K8S_VERSION=${PODFENCE_E2E_K8S_VERSION:-v1.37.2}
PFN_DEBIAN_SUITE=trixie # etcd-server 3.5.16 at the time of writing
PFN_DEBIAN_MIRROR=${PODFENCE_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}

PFN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PFN_CACHE=${PODFENCE_E2E_NODE_CACHE:-/var/cache/podfence-e2e-node}
PFN_K8S_MODULE=$PFN_DIR/tools/k8s-${PFN_K8S_VERSION%.*}
# The version's kube-apiserver, kubelet, kube-scheduler, kube-controller-manager and kubectl;
# then what any version uses: etcd and pf-podresources.
PFN_BIN=$PFN_CACHE/$PFN_K8S_VERSION/bin
PFN_SHARED_BIN=$PFN_CACHE/shared/bin

export PATH="$PFN_BIN:$PFN_SHARED_BIN:$PATH"

# pfn_k8s_versions: the releases the wrapper modules pin, one a line (v1.31.0 ...).
pfn_k8s_versions() {
	sed -n 's|^require k8s.io/kubernetes \(v[0-9.]*\)$|\1|p; s|^\tk8s.io/kubernetes \(v[0-9.]*\)$|\1|p' \
		"$PFN_DIR"/tools/k8s-v*/go.mod | LC_ALL=C sort -uV
}

# pfn_k8s_version_check: PFN_K8S_VERSION is one that a wrapper module pins, or the script dies
# naming the value and the versions allowed.
pfn_k8s_version_check() {
	pfn_k8s_versions | grep -qxF -- "$PFN_K8S_VERSION" ||
		pf_die "PODFENCE_E2E_K8S_VERSION=\"$PFN_K8S_VERSION\": not a version of a wrapper module in $PFN_DIR/tools (allowed: $(pfn_k8s_versions | paste -sd' '))"
}

# pf_k8s_at_least MAJOR.MINOR: true when the release under test is MAJOR.MINOR or newer, e.g.
# `pf_k8s_at_least 1.34 && prove_dra` (resource.k8s.io/v1, DRA GA).
pf_k8s_at_least() {
	local want=${1:-} have=${PFN_K8S_VERSION#v} hmaj hmin
	[[ $want =~ ^([0-9]+)\.([0-9]+)$ ]] || pf_die "pf_k8s_at_least \"$want\": want MAJOR.MINOR, such as 1.34"
	hmaj=${have%%.*} hmin=${have#*.} hmin=${hmin%%.*}
	((hmaj > BASH_REMATCH[1] || (hmaj == BASH_REMATCH[1] && hmin >= BASH_REMATCH[2])))
}
