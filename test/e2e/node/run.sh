#!/usr/bin/env bash
# `make e2e-node`: podfence on a real one-node Kubernetes, end to end. Needs root.
#
# Setup (cluster-setup.sh, on top of cluster.sh's PKI, etcd, kube-apiserver and kubelet):
#   1. tools, cached: containerd/runc/crictl (test/e2e/tools.sh), kube-apiserver + kubelet +
#      kube-scheduler v1.31 and etcd + kubectl (test/e2e/node/k8s.sh), a static podfence;
#   2. etcd and kube-apiserver on loopback (token auth, Node+RBAC, service-account keys), the
#      `default` ServiceAccount made by hand (no controller-manager; no scheduler until the
#      scheduler-extender checks: pods name their node and do not mount a token);
#   3. deploy/ through `kubectl apply -k` (deploy-manifests.sh: server dry run of every
#      object, then for real with the webhook configurations pointed at the local webhook by
#      url: no Service routing here), the webhook's certificate from hack/certs.sh;
#   4. containerd with NRI (test/e2e/containerd.sh), `podfence webhook` (HTTPS on loopback),
#      `podfence agent` (NRI plugin + device plugin in the kubelet's device-plugin dir,
#      HTTPS metrics, the core-scheduling profiles; agent.sh), and a kubelet (cgroupfs, cgroup
#      v1, cpuManagerPolicy none, the pooled CPU reserved); the agent's token (deploy/'s
#      ServiceAccount, a kubeconfig tokenFile it re-reads) is then replaced by one bound to
#      the registered Node, as the DaemonSet pod's projected token is.
#
# Checks: pods through `kubectl apply` (pods.sh), checked (facts.sh) on the stored pod (the
# webhook's mutation), the node (device-plugin capacity), the kubelet's pod-resources API
# (allocated devices), the runtime (the exclusive-cpus annotation), the kernel (cgroup cpuset,
# CFS quota, affinity) and `kubectl exec env`. Pools fitted to this machine: the highest
# online CPU X makes the pool, the others the default pool. One pool dir holds two configs,
# each with its nodeSelector (as a ConfigMap would), read by agent and webhook; the agent's
# node label podfence-e2e/pools=exclusive|shared picks one. In order:
#   exclusive-pool.sh             exclusive_a=X through webhook, device plugin, kubelet and
#                                 runtime: capacity, allocation, refusals, freed on delete,
#                                 a kubelet restart. The EPC limit and the core-scheduling
#                                 group are checked on the stored pod only: this host has no
#                                 SGX and no core scheduling, so that pod is never bound.
#   metrics-auth.sh               the agent's /metrics and /state: HTTPS, 401 without a
#                                 token (and to a made-up one), 400 to plain HTTP, 403 to a
#                                 ServiceAccount without podfence-metrics-reader, 200 to one
#                                 bound to it; /healthz and /readyz open.
#   coresched-tenancy.sh          the profiles share e2e-group among NS only: a pod of a second
#                                 namespace naming it (podfence's or Koordinator's label) is
#                                 refused at kubectl apply, admitted in NS; the agent (same
#                                 profiles) reports the shared group in /state.
#   node-patch-policy.sh          deploy/'s ValidatingAdmissionPolicy: the agent (its token
#                                 bound to the Node since the kubelet registered it) patches
#                                 its own Node's podfence label; another label, its spec,
#                                 another Node, or a token without node claim: denied.
#   shared-pool-after-relabel.sh  the agent restarted on the other node label: shared_s=X,
#                                 CFS quota per millicpu, the kubelet refusing a pod over it.
#   scheduler-extender.sh         last: `podfence extender` and kube-scheduler configured
#                                 with it (filter + prioritize, not ignorable); unnamed-node
#                                 pods: an implicit one runs on the node, a core-sched-group
#                                 one stays Pending (FailedScheduling with the extender's
#                                 reason: the node is core-sched=unsupported); with a fake
#                                 Node fake-smt (core-sched=supported) the extender is asked
#                                 to prioritize and the group pod is bound there; fake node
#                                 and pods deleted.
#
# Output: one `PASS <what>: <facts>` / `FAIL <what>: <why>` line per check on stdout, progress
# on stderr, last `e2e-node: N passed, M failed`. Exit 1 on any failure (with log tails).
# Everything started is stopped and removed on exit, and the host sysctls the kubelet
# changes are restored, also after a failure or ^C (cleanup.sh).
#
# Environment: as test/e2e/lib.sh and test/e2e/node/lib.sh, with its own defaults:
#   PODFENCE_E2E_WORK=/tmp/pf-e2e-node, PODFENCE_E2E_CGROUP_PARENT=/podfence-e2e-node
#   PODFENCE_E2E_NODE_PORTS="etcd apiserver kubelet kubelet-healthz webhook metrics extender"
#     (default "22379 26443 20250 20248 28443 29464 28888"; etcd also uses the next port)
#   PODFENCE_E2E_KEEP=1 keeps the run dir (logs, configs, PKI) for a post-mortem.
set -euo pipefail
[ "$(id -u)" = 0 ] || {
	echo "e2e-node needs root (it runs containerd and a kubelet, creates cgroups and mounts)"
	exit 1
}
export PODFENCE_E2E_WORK=${PODFENCE_E2E_WORK:-/tmp/pf-e2e-node}
export PODFENCE_E2E_CGROUP_PARENT=${PODFENCE_E2E_CGROUP_PARENT:-/podfence-e2e-node}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../checks.sh"
. "$(dirname "$0")/cluster.sh"
REPO=$(cd "$PF_E2E_DIR/../.." && pwd)

# One node e2e per machine: the ports, the device-plugin mount point and the cgroup root are
# shared. A second run waits (fd 9 is closed for every child, see bg_start).
LOCK=/run/lock/podfence-e2e-node.lock
[[ -d /run/lock ]] || LOCK=/tmp/podfence-e2e-node.lock
exec 9>"$LOCK"
if ! flock -n 9; then
	pf_log "another e2e-node run is going on; waiting for it (lock $LOCK)"
	flock -w 1200 9 || pf_die "still locked after 20 min: $LOCK"
fi

# The script's stdout and stderr, for on_exit (children started here close 7 and 8).
exec 7>&1 8>&2

T0=$(pf_now_ms)
NODE=localhost # the apiserver reaches the kubelet by its Hostname address: loopback only
NS=pf-e2e-node
read -r ETCD_PORT API_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT WEBHOOK_PORT METRICS_PORT EXTENDER_PORT \
	<<<"${PODFENCE_E2E_NODE_PORTS:-22379 26443 20250 20248 28443 29464 28888}"
EXTENDER_PORT=${EXTENDER_PORT:-28888}
RUN=$(mktemp -d /tmp/pf-e2e-node-run.XXXXXX)
AGENT_LOG=$RUN/agent.log
DP_DIR=$RUN/device-plugins # the kubelet's /var/lib/kubelet/device-plugins (see cluster.sh)
started=0 finished=0
declare -A TIMES=()

step() { pf_log "== $*"; }
# timed NAME CMD...: runs CMD and records its duration under NAME for the summary.
timed() {
	local name=$1 t rc=0
	shift
	t=$(pf_now_ms)
	"$@" || rc=$?
	TIMES[$name]=$(pf_elapsed "$t")
	return "$rc"
}

. "$(dirname "$0")/cluster-setup.sh"
. "$(dirname "$0")/deploy-manifests.sh"
. "$(dirname "$0")/agent.sh"
. "$(dirname "$0")/pods.sh"
. "$(dirname "$0")/facts.sh"
. "$(dirname "$0")/cleanup.sh"
. "$(dirname "$0")/exclusive-pool.sh"
. "$(dirname "$0")/shared-pool-after-relabel.sh"
. "$(dirname "$0")/metrics-auth.sh"
. "$(dirname "$0")/coresched-tenancy.sh"
. "$(dirname "$0")/node-patch-policy.sh"
. "$(dirname "$0")/scheduler-extender.sh"

trap on_exit EXIT
trap 'exit 130' INT TERM

# --- setup --------------------------------------------------------------------------------

recover_stale
step "tools (cached) and a static podfence"
timed tools tools
ports_free_or_die
pool_configs

step "etcd and kube-apiserver $PFN_K8S_VERSION on 127.0.0.1:$API_PORT"
timed control-plane control_plane
expect_control_plane

step "deploy/ (kubectl apply -k), webhook certificate from hack/certs.sh"
timed deploy deploy_manifests
agent_credentials
kc create serviceaccount default -n podfence-system >/dev/null # for the exclusive-pool checks' refused pod

step "containerd with NRI, the webhook, the agent (exclusive pool config), the kubelet"
timed containerd start_node
sysctls_save
timed kubelet start_kubelet
pf_log "kubelet up (pid ${BG_PID[kubelet]}); node $NODE registered"
agent_node_token # the agent's token file now holds a token bound to that Node (node-patch policy)

# --- checks, each proving one thing ---------------------------------------------------------

step "exclusive pool through webhook, device plugin, kubelet and runtime: pools default=$DEF exclusive_a=$X"
timed exclusive-pool prove_exclusive_pool

step "metrics auth: the agent's /metrics and /state over HTTPS, for tokens RBAC allows"
timed metrics-auth prove_metrics_auth

step "core-scheduling tenancy: a namespace may not join another's shared group ($TENANT_NS, $NS)"
timed tenancy prove_coresched_tenancy

step "node-patch policy: the agent patches only its own Node's podfence keys"
timed node-patch-policy prove_node_patch_policy

step "shared pool after relabel: agent restarted with node label podfence-e2e/pools=shared: pools default=$DEF shared_s=$X"
timed shared-pool prove_shared_pool_after_relabel

step "scheduler extender: kube-scheduler $PFN_K8S_VERSION with the podfence extender"
timed scheduler prove_scheduler_extender

finished=1
