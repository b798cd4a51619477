#!/usr/bin/env bash
# `make e2e-node`: podfence on a real one-node Kubernetes, end to end, installed as users
# install it: `kubectl apply -k` of deploy/, the agent and the webhook running as its
# DaemonSet and Deployment pods from a podfence image built here. Needs root.
#
# Setup (cluster-setup.sh, on top of cluster.sh's PKI, control plane and kubelet and node.sh's
# node):
#   1. tools, cached: containerd/runc/crictl/crane (test/e2e/tools.sh), kube-apiserver, kubelet,
#      kube-scheduler, kube-controller-manager and kubectl of the release under test
#      (PODFENCE_E2E_K8S_VERSION: v1.37.2 by default, or v1.31.0) and etcd (k8s.sh); a registry
#      on loopback (`crane registry serve`) and the podfence image pushed to it twice by
#      hack/image.sh (tags e2e-1 and e2e-2, each its own build: main.version e2e-1, e2e-2);
#   2. etcd, kube-apiserver (token auth, Node+RBAC, service-account keys, aggregator routing:
#      webhooks called at their Service's endpoints), kube-controller-manager and
#      kube-scheduler for the whole run; from 1.34 with DRAConsumableCapacity on;
#   3. the node: containerd with NRI (test/e2e/containerd.sh; plain HTTP to the registry) in a
#      private mount namespace with the kubelet, where deploy/'s host paths are bind mounts of
#      run dirs (node.sh); a CNI bridge for the webhook's pods; the kubelet (cgroupfs, cgroup
#      v1, cpuManagerPolicy none, the pooled CPU reserved), the node labelled as an operator
#      labels a pooled node; from 1.34 the DRA smoke check (dra-cluster.sh): resource.k8s.io/v1
#      served, a DeviceClass made and deleted, consumable capacity on, the plugin dirs there;
#   4. deploy/ (deploy-manifests.sh): an overlay with what an operator sets (image, pool and
#      profile ConfigMaps, nodeSelector value, PODFENCE_NODE_LABEL, the API server's address
#      for host-network pods without kube-proxy), server dry run, caBundle, `kubectl apply -k`;
#      the agent pod synchronized over NRI, both webhook replicas behind the Service; the
#      agent's log followed from the kubelet's pod logs (agent.sh).
#
# Checks: pods through `kubectl apply` (pods.sh), checked (facts.sh) on the stored pod (the
# webhook's mutation), the node (device-plugin capacity), the kubelet's pod-resources API
# (allocated devices), the runtime (the exclusive-cpus annotation), the kernel (cgroup cpuset,
# CFS quota, affinity) and `kubectl exec env`. Pools fitted to this machine: the highest
# online CPU X makes the pool, the others the default pool. The pool ConfigMap holds two
# configs, each with its nodeSelector; the node label podfence-e2e/pools=exclusive|shared
# picks one. In order:
#   exclusive-pool.sh             exclusive_a=X through webhook, device plugin, kubelet and
#                                 runtime: capacity, allocation, refusals, freed on delete,
#                                 a kubelet restart. The EPC limit and the core-scheduling
#                                 group are checked on the stored pod only: this host has no
#                                 SGX and no core scheduling, so that pod is never bound.
#   isolation.sh                  an exclusive pod with CRI-O's irq-load-balancing and podfence's
#                                 cpu-load-balancing disable: no movable IRQ reaches its CPU while
#                                 it runs (host /proc/irq), the partition reported degraded (cgroup
#                                 v1 here: Event IsolationDegraded), every IRQ given back after.
#   agent-privileges.sh           the agent pod as shipped, unprivileged: deploy/'s pod spec,
#                                 the process's capabilities (CapEff), seccomp, no_new_privs,
#                                 mounts; cgroupfs writable, root read-only.
#   metrics-auth.sh               the agent's /metrics and /state on the node's address: HTTPS,
#                                 401 without a token (and to a made-up one), 400 to plain
#                                 HTTP, 403 to a ServiceAccount without
#                                 podfence-metrics-reader, 200 to one bound to it; /healthz and
#                                 /readyz open.
#   probe-flood.sh                96 connections held on the agent's metrics address for 75 s
#                                 (test/e2e/node/flood): the pod stays Ready, no restart, no
#                                 Unhealthy event, scrapes from another source answered.
#   coresched-tenancy.sh          the profiles share e2e-group among NS only: a pod of a second
#                                 namespace naming it (podfence's or Koordinator's label) is
#                                 refused at kubectl apply, admitted in NS; the agent (same
#                                 profiles) reports the shared group in /state.
#   node-patch-policy.sh          deploy/'s ValidatingAdmissionPolicy: the agent (its pod's
#                                 projected token, bound to the pod and its Node) patches its
#                                 own Node's podfence label; another label, its spec, another
#                                 Node, or a token without node claim: denied.
#   admission-policy.sh           deploy/admission-policy (ValidatingAdmissionPolicies) beside
#                                 the webhook and with no webhook at all (no-webhook/):
#                                 pods denied in the webhook's words, warned, admitted; an
#                                 exclusive pod runs without the webhook; then restored.
#   shared-pool-after-relabel.sh  the node relabelled podfence-e2e/pools=shared, the agent pod
#                                 replaced: shared_s=X, CFS quota per millicpu, the kubelet
#                                 refusing a pod over it.
#   agent-lifecycle.sh            the agent pod deleted (the DaemonSet restarts it), then
#                                 rolled out to image tag e2e-2: running containers keep their
#                                 process, cpuset and quota; the new webhook admits.
#   scheduler-extender.sh         `podfence extender` and a second kube-scheduler
#                                 (podfence-scheduler) configured with it (filter +
#                                 prioritize, not ignorable); pods naming it: an implicit one
#                                 runs on the node, a core-sched-group one stays Pending
#                                 (FailedScheduling with the extender's reason: the node is
#                                 core-sched=unsupported); with a fake Node fake-smt
#                                 (core-sched=supported) the extender is asked to prioritize
#                                 and the group pod is bound there; fake node and pods deleted.
#   dra.sh                        from 1.34: deploy/dra applied and the node relabelled dra
#                                 (exclusive_d=X, requestAPI: dra): the driver's slice;
#                                 its ServiceAccount's token (bound to its pod and node)
#                                 writes this node's slices, and is refused another
#                                 node's, all nodes', another driver's, and without node
#                                 claim (resourceslice-policy.yaml); then
#                                 a claim pod on CPU X (grant, CDI spec, cgroup), a second
#                                 one Pending, agent and kubelet restarts move nothing,
#                                 delete frees CPU X for the waiting pod.
#   uninstall.sh                  `kubectl delete -k`; nothing of podfence left in the
#                                 API; what stays on the node, as the README lists it.
#   helm-e2e.sh                   last: deploy/helm/podfence with the same values (image, pool
#                                 configs, profiles, node label): `helm install --wait` (the
#                                 agent and webhook pods ready), its webhook mutates a pool pod,
#                                 `helm upgrade` keeps the CA, `helm uninstall` leaves nothing.
#
# Output: one `PASS <what>: <facts>` / `FAIL <what>: <why>` line per check on stdout, progress
# on stderr, last `e2e-node: N passed, M failed`. Exit 1 on any failure (with log tails).
# Everything started is stopped and removed on exit, and the host sysctls the kubelet and the
# CNI bridge change are restored, also after a failure or ^C (cleanup.sh).
#
# Environment: as test/e2e/lib.sh and test/e2e/node/lib.sh, with its own defaults:
#   PODFENCE_E2E_K8S_VERSION=v1.37.2 (or v1.31.0: the releases tools/k8s-v*/go.mod pin;
#     `make e2e-node PODFENCE_E2E_K8S_VERSION=v1.31.0`)
#   PODFENCE_E2E_WORK=/tmp/pf-e2e-node, PODFENCE_E2E_CGROUP_PARENT=/podfence-e2e-node
#   PODFENCE_E2E_NODE_PORTS="etcd apiserver kubelet kubelet-healthz registry extender"
#     (default "22379 26443 20250 20248 25000 28888"; etcd also uses the next port; the
#     agent's metrics port is deploy/'s, 9464 on the node's address)
#   PODFENCE_E2E_KEEP=1 keeps the run dir (logs, configs, PKI) for a post-mortem.
set -euo pipefail
[ "$(id -u)" = 0 ] || {
	echo "e2e-node needs root (it runs containerd and a kubelet, creates cgroups and mounts)"
	exit 1
}
export PODFENCE_E2E_WORK=${PODFENCE_E2E_WORK:-/tmp/pf-e2e-node}
export PODFENCE_E2E_CGROUP_PARENT=${PODFENCE_E2E_CGROUP_PARENT:-/podfence-e2e-node}
export PODFENCE_E2E_CDI_DIRS=/var/run/cdi # DRA drivers' CDI specs (node.sh binds it)
. "$(dirname "$0")/lib.sh"
pfn_k8s_version_check
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
read -r ETCD_PORT API_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT REGISTRY_PORT EXTENDER_PORT \
	<<<"${PODFENCE_E2E_NODE_PORTS:-22379 26443 20250 20248 25000 28888}"
EXTENDER_PORT=${EXTENDER_PORT:-28888}
RUN=$(mktemp -d /tmp/pf-e2e-node-run.XXXXXX)
DP_DIR=$RUN/kubelet/device-plugins # the node's /var/lib/kubelet/device-plugins (see node.sh)
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

. "$(dirname "$0")/node.sh"
. "$(dirname "$0")/cluster-setup.sh"
. "$(dirname "$0")/dra-cluster.sh"
. "$(dirname "$0")/deploy-manifests.sh"
. "$(dirname "$0")/agent.sh"
. "$(dirname "$0")/pods.sh"
. "$(dirname "$0")/facts.sh"
. "$(dirname "$0")/cleanup.sh"
. "$(dirname "$0")/exclusive-pool.sh"
. "$(dirname "$0")/isolation.sh"
. "$(dirname "$0")/agent-privileges.sh"
. "$(dirname "$0")/shared-pool-after-relabel.sh"
. "$(dirname "$0")/agent-lifecycle.sh"
. "$(dirname "$0")/metrics-auth.sh"
. "$(dirname "$0")/probe-flood.sh"
. "$(dirname "$0")/coresched-tenancy.sh"
. "$(dirname "$0")/node-patch-policy.sh"
. "$(dirname "$0")/admission-policy.sh"
. "$(dirname "$0")/scheduler-extender.sh"
. "$(dirname "$0")/dra.sh"
. "$(dirname "$0")/uninstall.sh"
. "$(dirname "$0")/helm-install.sh"
. "$(dirname "$0")/helm-e2e.sh"

trap on_exit EXIT
trap 'exit 130' INT TERM

# --- setup --------------------------------------------------------------------------------

recover_stale
ports_free_or_die
step "tools (cached), the podfence image (hack/image.sh) in a registry on $REGISTRY"
timed tools tools
pool_configs

step "etcd, kube-apiserver, kube-controller-manager and kube-scheduler $PFN_K8S_VERSION on 127.0.0.1:$API_PORT"
timed control-plane control_plane
expect_control_plane

step "the node: containerd with NRI and a CNI bridge in its own mount namespace, the kubelet"
sysctls_save
timed node start_node
timed kubelet start_kubelet
pf_log "kubelet up (pid ${BG_PID[kubelet]}); node $NODE registered"
if pf_k8s_at_least 1.34; then
	step "DRA cluster: resource.k8s.io/v1, consumable capacity, the kubelet's plugin dirs"
	timed dra-cluster prove_dra_cluster
fi

step "deploy/ (kubectl apply -k of an operator's overlay): the agent and webhook pods from $REGISTRY/podfence:$OVERLAY_TAG"
bg_start agent-log agent_log_follow
timed deploy deploy_manifests

# --- checks, each proving one thing ---------------------------------------------------------

step "exclusive pool through webhook, device plugin, kubelet and runtime: pools default=$DEF exclusive_a=$X"
timed exclusive-pool prove_exclusive_pool

step "isolation: interrupts kept off an exclusive pod's CPU $X by the shipped agent, given back after"
timed isolation prove_isolation

step "privileges: the agent as deploy/'s unprivileged pod"
timed privileges prove_agent_privileges

step "metrics auth: the agent's /metrics and /state over HTTPS, for tokens RBAC allows"
timed metrics-auth prove_metrics_auth

step "probes under a flood: 96 connections held on the agent's metrics address for ${FLOOD_SECONDS}s"
timed probe-flood prove_probes_under_flood

step "core-scheduling tenancy: a namespace may not join another's shared group ($TENANT_NS, $NS)"
timed tenancy prove_coresched_tenancy

step "node-patch policy: the agent patches only its own Node's podfence keys"
timed node-patch-policy prove_node_patch_policy

step "admission policies: deploy/admission-policy beside the webhook, then with no webhook at all"
timed admission-policy prove_admission_policy

step "shared pool after relabel: node label podfence-e2e/pools=shared, agent pod replaced: pools default=$DEF shared_s=$X"
timed shared-pool prove_shared_pool_after_relabel

step "agent lifecycle: its pod deleted, then rolled out to image tag e2e-2; no container moves"
timed lifecycle prove_agent_lifecycle

step "scheduler extender: podfence-scheduler (kube-scheduler $PFN_K8S_VERSION) with the podfence extender"
timed scheduler prove_scheduler_extender

if pf_k8s_at_least 1.34; then
	step "DRA: deploy/dra, node label podfence-e2e/pools=dra (exclusive_d=$X, requestAPI: dra), a claim pod on CPU $X"
	timed dra prove_dra
fi

step "uninstall: kubectl delete -k; what stays on the node"
timed uninstall prove_uninstall

step "Helm: deploy/helm/podfence installed (--wait), upgraded, uninstalled with the e2e's values"
timed helm prove_helm_install

finished=1
