# shellcheck shell=bash
# A one-node Kubernetes control plane and kubelet on loopback, for test/e2e/node/run.sh (its
# setup steps are cluster-setup.sh; the node's mount namespace and network node.sh's).
# Sourced after lib.sh and test/e2e/checks.sh; uses
#   RUN    the run's temp dir (PKI, configs, data, logs)
#   NODE   the node name;  API_PORT ETCD_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT
# Every process is a child of the calling shell: bg_start records it in BG_PID[name],
# bg_stop ends it (SIGTERM, SIGKILL after a timeout) and reaps it.

declare -A BG_PID=()

# bg_start NAME CMD...: runs CMD in the background, stdio to $RUN/NAME.log, without fd 9
# (run.sh's lock) so that a leaked child cannot hold the lock, nor 7 and 8 (run.sh's
# stdout and stderr) so that none keeps a caller's pipe open.
bg_start() {
	local name=$1
	shift
	"$@" </dev/null >>"$RUN/$name.log" 2>&1 7>&- 8>&- 9>&- &
	BG_PID[$name]=$!
}

# bg_running NAME: true while NAME's process is alive (and not a zombie).
bg_running() {
	local pid=${BG_PID[$1]:-} state
	[[ -n $pid ]] || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z ]]
}

# bg_stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (default 10); reaps it.
bg_stop() {
	local name=$1 n=$((${2:-10} * 10)) pid=${BG_PID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < n; i++)); do
		bg_running "$name" || break
		sleep 0.1
	done
	if bg_running "$name"; then
		pf_log "$name (pid $pid) did not stop on SIGTERM; killing"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	unset "BG_PID[$name]"
}

# wait_until SECONDS CMD...: runs CMD every 0.2 s until it succeeds; false after SECONDS.
# (CMD runs in a subshell, so that a signal's trap never runs with its output discarded.)
wait_until() {
	local n=$(($1 * 5))
	shift
	for ((i = 0; i < n; i++)); do
		("$@") >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}

# port_free PORT: nothing listens on 127.0.0.1:PORT (or the wildcard address).
port_free() { ! ss -Htln "sport = :$1" | grep -q .; }

# --- PKI ------------------------------------------------------------------------------------

# pki_init: a cluster CA, the API server's serving cert, the kubelet's serving cert, the
# API server's client cert for the kubelet (exec, logs), the service-account key pair, and
# two bearer tokens (admin in system:masters, the kubelet as system:node:$NODE).
pki_init() {
	local p=$RUN/pki
	mkdir -p "$p"
	(
		umask 077
		openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 2 -keyout "$p/ca.key" -out "$p/ca.crt" \
			-subj "/CN=podfence-e2e-ca" -addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign"
		pki_cert apiserver "/CN=kube-apiserver" serverAuth \
			"DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1"
		pki_cert kubelet "/CN=$NODE" serverAuth "DNS:$NODE,DNS:localhost,IP:127.0.0.1"
		pki_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth ""
		openssl genrsa -out "$p/sa.key" 2048
		openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub"
	) >"$RUN/pki.log" 2>&1 || {
		cat "$RUN/pki.log" >&2
		return 1
	}
	ADMIN_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	KUBELET_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	printf '%s,admin,uid-admin,"system:masters"\n%s,system:node:%s,uid-node,"system:nodes"\n' \
		"$ADMIN_TOKEN" "$KUBELET_TOKEN" "$NODE" >"$p/tokens.csv"
	chmod 0600 "$p/tokens.csv"
	kubeconfig "$RUN/admin.kubeconfig" "$ADMIN_TOKEN"
	kubeconfig "$RUN/kubelet.kubeconfig" "$KUBELET_TOKEN"
}

# pki_cert NAME SUBJECT EKU SANS: NAME.crt/NAME.key signed by the CA.
pki_cert() {
	local p=$RUN/pki name=$1 subj=$2 eku=$3 san=$4
	{
		echo "basicConstraints = critical,CA:FALSE"
		echo "keyUsage = critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage = $eku"
		[[ -z $san ]] || echo "subjectAltName = $san"
	} >"$p/$name.ext"
	openssl req -new -nodes -newkey rsa:2048 -sha256 -keyout "$p/$name.key" -out "$p/$name.csr" -subj "$subj"
	openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -CAserial "$p/ca.srl" \
		-sha256 -days 2 -extfile "$p/$name.ext" -out "$p/$name.crt"
}

# kubeconfig FILE TOKEN
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$RUN/pki/ca.crt"}
users:
  - name: e2e
    user: {token: "$2"}
contexts:
  - name: e2e
    context: {cluster: e2e, user: e2e}
current-context: e2e
EOF
	chmod 0600 "$1"
}

# kc ARGS...: kubectl as the admin.
kc() { kubectl --kubeconfig "$RUN/admin.kubeconfig" --request-timeout=30s "$@"; }

# feature_gates: the gates every component of the release runs with, as --feature-gates takes
# them: from 1.34 (DRA GA, resource.k8s.io/v1) DRAConsumableCapacity (alpha in 1.34, beta and
# on by default from 1.36), so that DRA drivers may publish shareable devices with capacity.
feature_gates() {
	if pf_k8s_at_least 1.34; then echo DRAConsumableCapacity=true; fi
}

# --- etcd and kube-apiserver ------------------------------------------------------------------

etcd_start() {
	local peer=http://127.0.0.1:$((ETCD_PORT + 1))
	bg_start etcd etcd --name e2e --data-dir "$RUN/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" --initial-cluster "e2e=$peer" \
		--unsafe-no-fsync --log-level warn
	wait_until 30 etcd_healthy
}
etcd_healthy() { curl -sf "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

# --endpoint-reconciler-type none: the API server is on loopback only, which releases from
# 1.34 refuse as the kubernetes Service's endpoint ("may not be in the loopback range"); no
# pod here reaches it through that Service (no kube-proxy: the agent's pods are given
# KUBERNETES_SERVICE_HOST=127.0.0.1, deploy-manifests.sh).
apiserver_start() {
	local p=$RUN/pki
	bg_start kube-apiserver kube-apiserver \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--endpoint-reconciler-type none \
		--tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
		--token-auth-file "$p/tokens.csv" --authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction --allow-privileged=true \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$p/sa.pub" \
		--service-account-signing-key-file "$p/sa.key" --api-audiences https://kubernetes.default.svc \
		--service-cluster-ip-range 10.96.0.0/24 \
		--kubelet-client-certificate "$p/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$p/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$p/ca.crt" --kubelet-preferred-address-types Hostname \
		--cert-dir "$RUN/apiserver" --profiling=false --enable-priority-and-fairness=false \
		--enable-aggregator-routing=true --feature-gates "$(feature_gates)"
	wait_until 120 apiserver_ready
}
apiserver_ready() {
	curl -sf --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
		"https://127.0.0.1:$API_PORT/readyz" | grep -qx ok
}

# Services have no ClusterIP route here (no kube-proxy): --enable-aggregator-routing makes the
# API server call a Service at its endpoints, for aggregated APIs and, through the same
# resolver, for admission webhooks (deploy/'s configurations name the webhook's Service).

# controller_manager_start: kube-controller-manager as the admin, each controller with its own
# ServiceAccount's credentials (the bootstrap RBAC of system:controller:*), no serving port, no
# leader election: ServiceAccount default and kube-root-ca.crt in each namespace (a projected
# token needs both), DaemonSet, Deployment, Endpoints, node lifecycle (the not-ready taint),
# garbage collection and namespace deletion.
controller_manager_start() {
	bg_start kube-controller-manager kube-controller-manager --kubeconfig "$RUN/admin.kubeconfig" \
		--secure-port 0 --leader-elect=false --use-service-account-credentials \
		--service-account-private-key-file "$RUN/pki/sa.key" --root-ca-file "$RUN/pki/ca.crt" \
		--feature-gates "$(feature_gates)" --v 1
}

# default_scheduler_start: kube-scheduler (default-scheduler) for the whole run: the
# Deployment's and the DaemonSet's pods; the scheduler-extender checks start a second one.
default_scheduler_start() {
	cat >"$RUN/default-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$RUN/admin.kubeconfig"}
leaderElection: {leaderElect: false}
EOF
	bg_start kube-scheduler kube-scheduler --config "$RUN/default-scheduler.yaml" --secure-port 0 \
		--feature-gates "$(feature_gates)" --v 1
}

# --- kubelet -----------------------------------------------------------------------------

# Host sysctls the kubelet sets when it starts (setupKernelTunables in
# pkg/kubelet/cm/container_manager_linux.go), and net.ipv4.ip_forward, which the bridge CNI
# plugin turns on (isGateway). Saved before the node starts, restored at the end.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
declare -A SYSCTL_SAVED=()

sysctls_save() {
	local k
	for k in "${KUBELET_SYSCTLS[@]}"; do SYSCTL_SAVED[$k]=$(sysctl -n "$k"); done
	for k in "${KUBELET_SYSCTLS[@]}"; do printf '%s=%s\n' "$k" "${SYSCTL_SAVED[$k]}"; done >"$RUN/sysctl.saved"
}

# sysctls_changed: "key=saved->now" for each saved sysctl that differs now.
sysctls_changed() {
	local k now out=""
	for k in "${!SYSCTL_SAVED[@]}"; do
		now=$(sysctl -n "$k")
		[[ $now == "${SYSCTL_SAVED[$k]}" ]] || out+="${out:+ }$k=${SYSCTL_SAVED[$k]}->$now"
	done
	printf '%s\n' "$out"
}

sysctls_restore() {
	local k
	for k in "${!SYSCTL_SAVED[@]}"; do
		[[ $(sysctl -n "$k") == "${SYSCTL_SAVED[$k]}" ]] ||
			sysctl -qw "$k=${SYSCTL_SAVED[$k]}" || pf_log "warning: could not restore $k=${SYSCTL_SAVED[$k]}"
	done
}

# The kubelet runs in the node's mount namespace (node.sh), where /var/lib/kubelet (its fixed
# device-plugin dir included) is its --root-dir in the run dir and /var/log a run dir too;
# everything it hands to containerd (pod dirs, log paths) is under --root-dir and podLogsDir.
# shellcheck disable=SC2034 # HOST_DP_DIR: cleanup.sh's leftovers (no mount there on the host)
HOST_DP_DIR=/var/lib/kubelet/device-plugins
CREATED_DIRS=()

kubelet_prepare() {
	local d cg=${PF_CGROUP_PARENT#/}
	mkdir -p "$RUN/kubelet" "$RUN/pod-logs"
	# cgroupRoot must exist on every hierarchy; a new cpuset cgroup starts with no CPUs.
	for d in /sys/fs/cgroup/*/; do
		d=${d%/}
		[[ -L $d ]] && continue
		mkdir -p "$d/$cg"
		if [[ -f $d/cpuset.cpus ]]; then
			cat "$d/cpuset.cpus" >"$d/$cg/cpuset.cpus"
			cat "$d/cpuset.mems" >"$d/$cg/cpuset.mems"
		fi
	done
	cat >"$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $RUN/pki/kubelet.crt
tlsPrivateKeyFile: $RUN/pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $RUN/pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$PF_CONTAINERD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: $PF_CGROUP_PARENT
cgroupsPerQOS: true
# This host has cgroup v1, which kubelets from 1.35 refuse by default.
failCgroupV1: false
featureGates: {$(feature_gates | sed 's/=/: /')}
cpuManagerPolicy: none
failSwapOn: false
podLogsDir: $RUN/pod-logs
maxPods: 16
nodeStatusUpdateFrequency: 2s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%}
# The pooled CPUs (the pool on CPU $X) are not for the kubelet's cpu accounting: reserve
# them, so that allocatable cpu is the default pool (README: Kubelet settings).
systemReserved: {cpu: "$POOLED"}
enforceNodeAllocatable: [pods]
EOF
}

kubelet_start() {
	bg_start kubelet nsenter --mount="/proc/$(node_pid)/ns/mnt" -- \
		"$PFN_BIN/kubelet" --config "$RUN/kubelet.yaml" --kubeconfig "$RUN/kubelet.kubeconfig" \
		--root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet/pki" --hostname-override "$NODE" --v 1
	wait_until 60 kubelet_healthy
}
kubelet_healthy() { curl -sf "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" | grep -qx ok; }

# host_dirs_remove: the mount points node_prepare created, if empty.
host_dirs_remove() {
	local d
	for d in ${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"}; do
		rmdir "$d" 2>/dev/null || pf_log "warning: $d is not empty; left in place"
	done
	CREATED_DIRS=()
}
