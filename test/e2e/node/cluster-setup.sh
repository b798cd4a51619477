# shellcheck shell=bash
# The setup steps of the node e2e, for run.sh, in the order it calls them: the tools and a
# static podfence, free ports, the pool configs fitted to this machine, the control plane,
# containerd with the webhook and the agent, the kubelet. The building blocks (PKI, etcd,
# kube-apiserver, kubelet, background processes) are cluster.sh's; deploy/ is applied by
# deploy-manifests.sh between the control plane and containerd.
# shellcheck disable=SC2034 # NCPU, POOLED and started are read by run.sh and the checks

tools() {
	"$PF_E2E_DIR/tools.sh" >&2
	"$PFN_DIR/k8s.sh" >&2
	local t
	t=$(pf_now_ms)
	(cd "$REPO" && CGO_ENABLED=0 go build -o "$RUN/podfence" ./cmd/podfence && CGO_ENABLED=0 go build -o "$RUN/podfence-extender" ./cmd/podfence-extender) ||
		pf_die "CGO_ENABLED=0 go build ./cmd/podfence ./cmd/podfence-extender failed"
	pf_log "podfence built in $(pf_elapsed "$t")s"
}

# ports_free_or_die: every port of the run (PODFENCE_E2E_NODE_PORTS, etcd's next) is free.
ports_free_or_die() {
	local p
	for p in "$ETCD_PORT" $((ETCD_PORT + 1)) "$API_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$WEBHOOK_PORT" "$METRICS_PORT" "$EXTENDER_PORT"; do
		port_free "$p" || pf_die "port $p is in use (set PODFENCE_E2E_NODE_PORTS)"
	done
}

# pool_configs: pools fitted to this machine: X is the highest online CPU, the rest is the
# default pool (ONLINE, X, DEF, NCPU, POOLED). One dir holds both configs, each selected by
# the node label podfence-e2e/pools (see agent_start): poolconfig-exclusive.yaml
# (exclusive_a=X), poolconfig-shared.yaml (shared_s=X). Also the core-scheduling profiles.
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
	kc create namespace "$NS" >/dev/null
	kc create serviceaccount default -n "$NS" >/dev/null # no controller-manager to make it
}

# expect_control_plane: a PASS line with the versions of etcd, kube-apiserver and kubectl.
expect_control_plane() {
	pass "control plane" "etcd $(etcd --version | awk '/etcd Version/ {print $3}'), kube-apiserver $(kc version -o json | jq -r .serverVersion.gitVersion) ready; kubectl $(kc version -o json | jq -r .clientVersion.gitVersion)"
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

# containerd_start: test/e2e/containerd.sh start, once more if it fails. containerd.sh
# records the PID of `setsid containerd &` and checks at once that its cmdline names the
# config; when the forked shell has not exec'd yet (a loaded machine), the check fails, start
# reports "containerd exited during startup" and leaves the real containerd running, unknown
# to stop. Such an orphan is ended here, by its exact config path, before the retry.
containerd_start() {
	local try pid
	for try in 1 2; do
		if env=$("$PF_E2E_DIR/containerd.sh" start 7>&- 8>&- 9>&-); then
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

# start_node: containerd with NRI, the webhook, and the agent on the exclusive pool config.
start_node() {
	started=1
	containerd_start || pf_die "test/e2e/containerd.sh start failed twice"
	webhook_start || pf_die "the webhook did not answer /healthz within 20s"
	mkdir -p "$DP_DIR" # as the DaemonSet's hostPath (type Directory): the kubelet's dir exists
	agent_start exclusive || pf_die "the agent did not start"
}

start_kubelet() {
	kubelet_prepare
	kubelet_start || pf_die "the kubelet is not healthy within 60s"
	wait_until 60 kc get node "$NODE" || pf_die "the kubelet did not register node $NODE"
}
