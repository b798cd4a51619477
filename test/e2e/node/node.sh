# shellcheck shell=bash
# The node of the node e2e, for run.sh: its mount namespace, its pod network and the registry
# its podfence image comes from. Sourced after cluster.sh; uses RUN, DP_DIR, REGISTRY_PORT and
# test/e2e/lib.sh's paths.
#
# Mount namespace. containerd (and through it every shim, runc and container) and the kubelet
# share one private mount namespace, made when containerd starts (node_unshare), in which the
# host paths that deploy/'s DaemonSet mounts and the kubelet writes are bind mounts of run dirs:
NODE_DIR=$RUN/node
NODE_BINDS=(
	"$RUN/kubelet" /var/lib/kubelet                # its --root-dir: device-plugins/, pod-resources/, pods/
	"$RUN/var-log" /var/log                        # the kubelet links container logs there
	"$NODE_DIR/run-nri" /var/run/nri               # a hard link of containerd's NRI socket (node_nri_link)
	"$NODE_DIR/opt-podfence" /opt/podfence         # the agent's start binary (its initContainer)
	"$NODE_DIR/var-lib-podfence" /var/lib/podfence # the agent's checkpoint
	"$NODE_DIR/run-cdi" /var/run/cdi               # CDI specs of DRA drivers, read by containerd
)
# So the DaemonSet's hostPaths are used as shipped and the host gets only the mount points
# (created if missing, removed after). The kubelet joins the namespace (node_ns), so the tmpfs
# volumes it mounts for pods (projected tokens, Secrets) are where runc looks; all of it ends
# with the namespace's last process.
#
# Pod network. The webhook Deployment's pods need an IP: Debian's CNI plugins (bridge,
# host-local, loopback) put them on bridge CNI_BRIDGE, subnet CNI_SUBNET, the host at .1, so the
# API server (called with --enable-aggregator-routing at the Service's endpoints) and the
# kubelet's probes reach them from the host. No masquerade: they reach the host only.
CNI_BRIDGE=pfe2e0
CNI_SUBNET=10.244.77.0/24
CNI_PLUGINS=/usr/lib/cni # containernetworking-plugins
REGISTRY=127.0.0.1:$REGISTRY_PORT

# node_prepare: the bind sources, and the mount points the host lacks (CREATED_DIRS, removed at
# the end; the list is also in $RUN/created-dirs for recover_stale).
node_prepare() {
	local i d
	mkdir -p "$DP_DIR"
	for ((i = 0; i < ${#NODE_BINDS[@]}; i += 2)); do
		mkdir -p "${NODE_BINDS[i]}"
		for d in $(dirs_to "${NODE_BINDS[i + 1]}"); do
			mkdir "$d"
			CREATED_DIRS=("$d" ${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"})
		done
	done
	printf '%s\n' ${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"} >"$RUN/created-dirs"
}

# dirs_to PATH: the missing directories down to PATH (symlinks resolved), outermost first.
dirs_to() {
	local p out=()
	p=$(realpath -m "$1")
	while [[ $p != / && ! -e $p ]]; do
		out=("$p" ${out[@]+"${out[@]}"})
		p=$(dirname "$p")
	done
	printf '%s\n' ${out[@]+"${out[@]}"}
}

# node_unshare CMD...: CMD in a new private mount namespace with NODE_BINDS mounted.
node_unshare() {
	# shellcheck disable=SC2016 # expanded by the inner sh
	unshare --mount --propagation private -- /bin/sh -c '
		while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 1; shift 2; done
		shift && exec "$@"' sh "${NODE_BINDS[@]}" -- "$@"
}

# node_pid: containerd's PID, the process that holds the node's mount namespace.
node_pid() { cat "$PF_CONTAINERD_PID"; }

# node_ns CMD...: CMD in the node's mount namespace (as the kubelet and the pods see the host).
node_ns() { nsenter --mount="/proc/$(node_pid)/ns/mnt" -- "$@"; }

# node_nri_link: containerd's NRI socket where deploy/'s DaemonSet mounts it from,
# /var/run/nri/nri.sock of the node: a hard link (one socket, two names).
node_nri_link() {
	ln -f "$PF_NRI_SOCK" "$NODE_DIR/run-nri/nri.sock"
}

# node_mntns: the node's mount namespace, as readlink shows it (start_node keeps it in NODE_MNTNS).
NODE_MNTNS=""
node_mntns() { readlink "/proc/$(node_pid)/ns/mnt"; }

# node_ns_procs: processes still in the node's mount namespace.
node_ns_procs() {
	local p
	[[ -n $NODE_MNTNS ]] || return 0
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$NODE_MNTNS" ]] && echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" | cut -c1-80)"
	done
	return 0
}

# cni_setup: the plugins and the network config into containerd's CNI dirs (it watches them).
cni_setup() {
	local p
	for p in bridge host-local loopback; do
		[[ -x $CNI_PLUGINS/$p ]] || pf_die "$CNI_PLUGINS/$p missing (containernetworking-plugins: test/e2e/node/k8s.sh)"
		ln -sf "$CNI_PLUGINS/$p" "$PF_WORK/cni/bin/$p"
	done
	cat >"$PF_WORK/cni/net.d/10-podfence-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "podfence-e2e",
  "plugins": [{
    "type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CNI_SUBNET"}]], "dataDir": "$PF_WORK/cni/ipam"}
  }]
}
EOF
}

# cni_bridge_remove: the bridge the plugin made (its veths go with their pods).
cni_bridge_remove() {
	if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
		ip link del "$CNI_BRIDGE" || pf_log "warning: could not delete bridge $CNI_BRIDGE"
	fi
	return 0
}

# registry_start: `crane registry serve` on loopback, blobs in the run dir.
registry_start() {
	mkdir -p "$RUN/registry"
	bg_start registry crane registry serve --address "$REGISTRY" --disk "$RUN/registry"
	wait_until 20 curl -sf "http://$REGISTRY/v2/"
}

# image_push TAG VERSION: hack/image.sh builds the podfence image (binaries with main.version
# VERSION) and pushes it as $REGISTRY/podfence:TAG; its binaries also land in $RUN (the
# extender runs from there). Sets IMAGE_REF[TAG] to the pushed reference by digest.
declare -A IMAGE_REF=()
image_push() {
	local out
	out=$(CRANE="$PF_BIN/crane" bash "$REPO/hack/image.sh" -t "$REGISTRY/podfence:$1" --version "$2" --bin-dir "$RUN" 2>"$RUN/image-$1.log") ||
		pf_die "hack/image.sh -t $REGISTRY/podfence:$1 failed: $(tail -n 5 "$RUN/image-$1.log")"
	# shellcheck disable=SC2034 # IMAGE_REF is deploy-manifests.sh's
	IMAGE_REF[$1]=$out
	pf_log "$(tail -n 1 "$RUN/image-$1.log")"
}
