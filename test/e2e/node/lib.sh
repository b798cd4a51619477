# shellcheck shell=bash
# shellcheck disable=SC2034 # variables used by the scripts that source this file
# Settings for the node e2e (test/e2e/node/*.sh), on top of the containerd harness's test/e2e/lib.sh.
#
# Environment (all optional):
#   PODFENCE_E2E_NODE_CACHE   kube-apiserver, kubelet, etcd, kubectl and their build caches
#                             (default /var/cache/podfence-e2e-node, beside test/e2e/lib.sh's cache)
#   PODFENCE_E2E_NODE_GOCACHE Go build cache for the Kubernetes build (default <cache>/gocache)
#   PODFENCE_E2E_DEBIAN_MIRROR  Debian mirror for trixie's etcd-server and kubectl
#                             (default http://deb.debian.org/debian)
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# Pinned versions. The Kubernetes build also depends on tools/k8s/go.mod and go.sum.
PFN_K8S_VERSION=v1.31.0
PFN_DEBIAN_SUITE=trixie # etcd-server 3.5.16, kubectl 1.32.3 at the time of writing
PFN_DEBIAN_MIRROR=${PODFENCE_E2E_DEBIAN_MIRROR:-http://deb.debian.org/debian}

PFN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PFN_CACHE=${PODFENCE_E2E_NODE_CACHE:-/var/cache/podfence-e2e-node}
PFN_BIN=$PFN_CACHE/bin

export PATH="$PFN_BIN:$PATH"
