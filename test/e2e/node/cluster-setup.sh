# shellcheck shell=bash
# The setup steps of the node e2e, for run.sh, in the order it calls them: free ports, the
# tools and the podfence image in a registry on loopback, the pool configs fitted to this
# machine, the control plane, the node (containerd with NRI and a pod network in the node's
# mount namespace, the kubelet). The building blocks are cluster.sh's (PKI, etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, background processes) and
# node.sh's; deploy-manifests.sh then runs the agent and the webhook as deploy/'s pods.
# shellcheck disable=SC2034 # NCPU, POOLED and started are read by run.sh and the checks

# tools: the cached tools, and the podfence image twice (versions e2e-1, the one deployed, and
# e2e-2, for the rollout check) built by hack/image.sh and pushed to the run's registry.
tools() {
	"$PF_E2E_DIR/tools.sh" >&2
	"$PFN_DIR/k8s.sh" >&2
	registry_start || pf_die "crane registry serve on $REGISTRY did not answer within 20s"
	image_push e2e-1 e2e-1
	image_push e2e-2 e2e-2
}

# ports_free_or_die: every port of the run (PODFENCE_E2E_NODE_PORTS, etcd's next, and the
# agent's metrics port of deploy/, on the node's address) is free.
ports_free_or_die() {
	local p
	for p in "$ETCD_PORT" $((ETCD_PORT + 1)) "$API_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$REGISTRY_PORT" "$EXTENDER_PORT" "$METRICS_PORT"; do
		port_free "$p" || pf_die "port $p is in use (set PODFENCE_E2E_NODE_PORTS; $METRICS_PORT is deploy/'s metrics port)"
	done
}

# pool_configs: pools fitted to this machine: X is the highest online CPU, the rest is the
# default pool (ONLINE, X, DEF, NCPU, POOLED). One dir holds both configs (the overlay's pool
# ConfigMap), each selected by the node label podfence-e2e/pools (agent_select_pools):
# poolconfig-exclusive.yaml (exclusive_a=X), poolconfig-shared.yaml (shared_s=X). Also the
# core-scheduling profiles (the overlay's profiles ConfigMap).
pool_configs() {
	ONLINE=$(cpulist_norm "$(cat /sys/devices/system/cpu/online)")
	X=$(cpulist_expand "$ONLINE" | tail -n1)
	DEF=$(cpulist_expand "$ONLINE" | grep -vx "$X" | cpulist_compress)
	[[ -n $DEF ]] || pf_die "one online CPU ($ONLINE): need at least 2 (the default pool plus one more)"
	NCPU=$(cpulist_expand "$ONLINE" | grep -c .)
	POOLED=1 # CPU X, in either pool config
	mkdir -p "$RUN/pools"
	cat >"$RUN/pools/poolconfig-exclusive.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  exclusive_a: {cpus: "$X", hyperThreadingPolicy: multiThreaded}
nodeSelector: {podfence-e2e/pools: exclusive}
EOF
	cat >"$RUN/pools/poolconfig-shared.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  shared_s: {cpus: "$X"}
nodeSelector: {podfence-e2e/pools: shared}
EOF
	cat >"$RUN/profiles.yaml" <<EOF
- name: e2e
  namespaces: [$NS]
  podSelector: {matchLabels: {podfence-e2e/coresched: "on"}}
  group: e2e-group
EOF
	pf_log "online CPUs $ONLINE: default pool $DEF; exclusive pool checks exclusive_a=$X, shared pool checks shared_s=$X"
}

control_plane() {
	pki_init || pf_die "PKI (openssl) failed"
	etcd_start || pf_die "etcd not healthy within 30s"
	apiserver_start || pf_die "kube-apiserver not ready within 120s"
	controller_manager_start
	default_scheduler_start
	kc create namespace "$NS" >/dev/null
}

# expect_control_plane: the versions of etcd, kube-apiserver and kubectl; the controller-
# manager's ServiceAccount and token controllers at work in NS (the default ServiceAccount
# and the kube-root-ca.crt ConfigMap every projected token mounts); kube-scheduler running.
expect_control_plane() {
	pass "control plane" "etcd $(etcd --version | awk '/etcd Version/ {print $3}'), kube-apiserver $(kc version -o json | jq -r .serverVersion.gitVersion) ready; kubectl $(kc version -o json | jq -r .clientVersion.gitVersion)"
	if wait_until 60 kc get serviceaccount/default configmap/kube-root-ca.crt -n "$NS" && bg_running kube-scheduler; then
		pass "control plane: kube-controller-manager and kube-scheduler $(kube-scheduler --version | awk '{print $2}') run" \
			"namespace $NS got ServiceAccount default and ConfigMap kube-root-ca.crt from kube-controller-manager $(kube-controller-manager --version | awk '{print $2}')"
	else
		fail "control plane: kube-controller-manager and kube-scheduler run" \
			"in $NS: $(kc get serviceaccount,configmap -n "$NS" -o name 2>&1 | tr '\n' ' '); kube-controller-manager $(bg_running kube-controller-manager && echo running || echo exited), kube-scheduler $(bg_running kube-scheduler && echo running || echo exited)"
	fi
}

# orphan_containerd: PIDs of containerd processes running our config that containerd.sh does
# not know of (see containerd_start).
orphan_containerd() {
	local f pid
	while read -r f; do
		pid=${f#/proc/} pid=${pid%/cmdline}
		[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$PF_BIN/containerd" ]] && echo "$pid"
	done < <(grep -lsaF -- "$PF_CONTAINERD_CONFIG" /proc/[0-9]*/cmdline)
	return 0
}

# containerd_start: test/e2e/containerd.sh start in the node's new mount namespace
# (node_unshare), once more if it fails. containerd.sh records the PID of `setsid
# containerd &` and checks at once that its cmdline names the config; when the forked shell
# has not exec'd yet (a loaded machine), the check fails, start reports "containerd exited
# during startup" and leaves the real containerd running, unknown to stop. Such an orphan is
# ended here, by its exact config path, before the retry.
containerd_start() {
	local try pid
	for try in 1 2; do
		if env=$(node_unshare "$PF_E2E_DIR/containerd.sh" start 7>&- 8>&- 9>&-); then
			eval "$env"
			return 0
		fi
		for pid in $(orphan_containerd); do
			pf_log "containerd.sh start lost containerd pid $pid (attempt $try); ending it"
			kill -TERM "$pid" 2>/dev/null || true
			wait_until 10 test ! -d "/proc/$pid" || kill -KILL "$pid" 2>/dev/null || true
		done
		"$PF_E2E_DIR/containerd.sh" stop 7>&- 8>&- 9>&- >&2 || true
	done
	return 1
}

# start_node: containerd with NRI (pulling from the run's registry in plain HTTP) in the
# node's mount namespace, its NRI socket where deploy/ looks, the pod network.
start_node() {
	started=1
	node_prepare
	export PODFENCE_E2E_REGISTRIES=$REGISTRY
	containerd_start || pf_die "test/e2e/containerd.sh start failed twice"
	NODE_MNTNS=$(node_mntns)
	[[ $NODE_MNTNS != "$(readlink /proc/self/ns/mnt)" ]] || pf_die "containerd runs in the host's mount namespace"
	node_nri_link || pf_die "could not link $PF_NRI_SOCK into the node's /var/run/nri"
	cni_setup
}

# start_kubelet: the kubelet, registered and Ready (the pod network is up), with the labels an
# operator gives a pooled node: podfence.io/pools=e2e (the DaemonSet's nodeSelector) and
# podfence-e2e/pools=exclusive (which selects the pool config).
start_kubelet() {
	local taints
	kubelet_prepare
	kubelet_start || pf_die "the kubelet is not healthy within 60s"
	wait_until 60 kc get node "$NODE" || pf_die "the kubelet did not register node $NODE"
	kc label node "$NODE" podfence.io/pools=e2e podfence-e2e/pools=exclusive >/dev/null
	if wait_until 60 test_node_ready; then
		taints=$(kc get node "$NODE" -o jsonpath='{.spec.taints[*].key}')
		pass "node: $NODE Ready" "$(node_ready "$NODE"); pod network $CNI_SUBNET on bridge $CNI_BRIDGE; taints: ${taints:-none}"
	else
		fail "node: $NODE Ready" "$(node_ready "$NODE"); taints: $(kc get node "$NODE" -o jsonpath='{.spec.taints[*].key}')"
	fi
}
# test_node_ready: Ready, and the node lifecycle controller has lifted the not-ready taint.
test_node_ready() {
	[[ $(kc get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] &&
		! kc get node "$NODE" -o jsonpath='{.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready
}
