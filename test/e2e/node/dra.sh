# shellcheck shell=bash
# Proof: exclusive CPUs through DRA (deploy/dra, DaemonSet podfence-dra beside the agent's). The
# node is relabelled podfence-e2e/pools=dra (poolconfig-dra.yaml: exclusive_d=X, requestAPI:
# dra), deploy/ gains its dra component (the driver's DaemonSet starts on the node) and the
# agent pod is replaced to take the label. The driver's own ServiceAccount: the policy
# resourceslice-policy.yaml lets its token (bound to its pod and node) write this node's
# ResourceSlices and refuses another node's, one for all nodes, another driver's and a token
# without node claim; RBAC gives the agent none. Then: the driver's ResourceSlice lists CPU X with its topology attributes
# and the device plugin does not advertise the pool; a pod with a ResourceClaim (template,
# DeviceClass exclusive-cpus.podfence.io) is scheduled, prepared (grant and CDI spec on the
# node) and runs on CPU X (cgroup, affinity, env); a second claim pod stays Pending (one CPU
# is never given twice); the agent and driver pods deleted and the kubelet restarted move nothing; the
# pod deleted frees the CPU (grant and CDI file gone) and the waiting pod gets it. Sourced by
# run.sh after agent.sh, pods.sh and facts.sh; needs Kubernetes >= 1.34 (DRA GA).

DRA_DRIVER=dra.podfence.io
DRA_CLASS=exclusive-cpus.podfence.io
DRA_GRANTS=$NODE_DIR/var-lib-podfence/dra/claims # the node's /var/lib/podfence/dra/claims
DRA_CDI=$NODE_DIR/run-cdi                         # the node's /var/run/cdi
DRA_SEL=app.kubernetes.io/name=podfence,app.kubernetes.io/component=dra
DRA_POD="" DRA_UID=""

# dra_new OLD_UID: "name uid" of a running driver pod other than OLD_UID; empty if none.
dra_new() {
	kc get pods -n "$PF_NS" -l "$DRA_SEL" -o json | jq -r --arg old "$1" '[.items[]
	  | select(.metadata.deletionTimestamp == null and .metadata.uid != $old and
	      ([.status.containerStatuses[]? | select(.name == "podfence-dra" and .state.running)] | length) > 0)]
	  | first // empty | "\(.metadata.name) \(.metadata.uid)"'
}
test_dra_new() { [[ -n $(dra_new "$1") ]]; }
# dra_wait OLD_UID: waits (90 s) for a running driver pod other than OLD_UID; sets DRA_POD and DRA_UID.
dra_wait() {
	wait_until 90 test_dra_new "$1" || return 1
	read -r DRA_POD DRA_UID <<<"$(dra_new "$1")"
}

# dra_pod_yaml NAME: a busybox pod (scheduled by kube-scheduler: DRA allocates there) with a
# claim from template excl-cpu, used by container app.
dra_pod_yaml() {
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $NS}
spec:
  hostNetwork: true
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 2
  resourceClaims: [{name: cpus, resourceClaimTemplateName: excl-cpu}]
  containers:
    - name: app
      image: $PF_BUSYBOX_IMAGE
      imagePullPolicy: Never
      command: [/bin/sleep, "86400"]
      resources: {claims: [{name: cpus}]}
YAML
}

dra_template_yaml() {
	cat <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: excl-cpu, namespace: $NS}
spec:
  spec:
    devices:
      requests:
        - name: cpus
          exactly: {deviceClassName: $DRA_CLASS, count: 1}
YAML
}

# dra_slice_devices: "name cpus numaNode coreID" per device of the driver's slices for NODE.
dra_slice_devices() {
	kc get resourceslices -o json | jq -r --arg d "$DRA_DRIVER" --arg n "$NODE" '.items[]
	  | select(.spec.driver == $d and .spec.nodeName == $n) | .spec.devices[]
	  | "\(.name) \(.attributes["dra.podfence.io/cpus"].string // "-") \(.attributes["resource.kubernetes.io/numaNode"].int // "-") \(.attributes["dra.podfence.io/coreID"].int // "-")"'
}
test_dra_slice() { [[ $(dra_slice_devices) == "cpu-$X $X "* ]]; }
# dra_slice_count: "N slices, M devices" of the driver's slices for NODE.
dra_slice_count() {
	kc get resourceslices -o json | jq -r --arg d "$DRA_DRIVER" --arg n "$NODE" '[.items[]
	  | select(.spec.driver == $d and .spec.nodeName == $n)]
	  | "\(length) slices, \(map(.spec.devices // [] | length) | add // 0) devices"'
}
test_dra_slice_published() { [[ $(dra_slice_count) != "0 slices,"* ]]; }

# dra_claim_of POD: the UID of the claim made for POD's "cpus" entry.
dra_claim_of() {
	local name
	name=$(pod_get "$1" '{.status.resourceClaimStatuses[0].resourceClaimName}')
	[[ -n $name ]] && kc get resourceclaim -n "$NS" "$name" -o jsonpath='{.metadata.uid}'
}
dra_claim_device() {
	local name
	name=$(pod_get "$1" '{.status.resourceClaimStatuses[0].resourceClaimName}')
	kc get resourceclaim -n "$NS" "$name" -o jsonpath='{.status.allocation.devices.results[0].driver}/{.status.allocation.devices.results[0].device}' 2>/dev/null
}
test_no_file() { [[ ! -e $1 ]]; }
# numa_of CPU: the NUMA node sysfs puts CPU on (0 without NUMA nodes in sysfs).
numa_of() {
	local d
	for d in /sys/devices/system/node/node*/cpu"$1"; do
		[[ -e $d ]] && { d=${d%/cpu*}; echo "${d##*node}"; return; }
	done
	echo 0
}

prove_dra() {
	local pid off uid old out held line
	if ! pf_k8s_at_least 1.34; then
		pf_log "DRA checks skipped: Kubernetes $PFN_K8S_VERSION has no resource.k8s.io/v1 (GA in 1.34)"
		return 0
	fi
	cat >"$RUN/pools/poolconfig-dra.yaml" <<EOF
pools:
  default: {cpus: "$DEF"}
  exclusive_d: {cpus: "$X", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
nodeSelector: {podfence-e2e/pools: dra}
EOF
	# Relabelled first, then deploy/ with component dra (uncommented in the run's copy of
	# deploy/kustomization.yaml, as its comment tells an operator) and the new pool config
	# applied: the driver's DaemonSet starts a pod that reads label dra, and the agent pod,
	# deleted, comes back reading it too.
	old=$AGENT_UID
	AGENT_OFF=$(log_lines)
	kc label node "$NODE" podfence-e2e/pools=dra --overwrite >/dev/null
	sed -i 's/^  # - dra\b.*/  - dra/' "$RUN/deploy/kustomization.yaml"
	if ! grep -qx '  - dra' "$RUN/deploy/kustomization.yaml"; then
		fail "DRA: deploy/ with component dra" "no '  # - dra' line in deploy/kustomization.yaml's components"
		return 0
	fi
	# shellcheck disable=SC2034 # overlay_write's
	OVERLAY_POOLS=dra
	overlay_write
	if out=$(kc apply -k "$OVERLAY" 2>&1) && dra_wait "" &&
		out=$(kc delete pod -n "$PF_NS" "$AGENT_POD" --wait=false 2>&1) && agent_wait "$old" "$AGENT_OFF" 180; then
		pass "DRA: deploy/dra applied: DaemonSet podfence-dra runs its pod, the agent pod replaced" \
			"driver pod $DRA_POD (service account $(kc get pod -n "$PF_NS" "$DRA_POD" -o jsonpath='{.spec.serviceAccountName}')); agent pod $AGENT_POD; DeviceClasses $(kc get deviceclass -o name | tr '\n' ' ')"
	else
		fail "DRA: deploy/dra applied: DaemonSet podfence-dra runs its pod, the agent pod replaced" \
			"${out:-} driver pods: $(kc get pods -n "$PF_NS" -l "$DRA_SEL" -o wide 2>&1 | tail -n +2 | tr '\n' ';') $AGENT_WAIT_ERR"
		return 0
	fi
	expect_log "DRA: the agent reads the dra pool config" "$AGENT_OFF" "msg=node .*pools=\"default=$DEF exclusive_d=$X\""
	# Pods of the earlier proofs still hold CPU X in the old layout: the agent keeps it in
	# force, and the driver publishes that layout (no DRA device) rather than the new config's
	# CPU X. They are deleted, the agent takes the new layout, the driver follows.
	held=$(kc get pods -n "$NS" -o name 2>/dev/null | sed 's#^pod/##' | paste -sd' ' -)
	if [[ -n $held ]]; then
		expect_log "DRA: the agent keeps the old layout while pods ($held) hold CPU $X" "$AGENT_OFF" 'msg="pool config read at start is pending"'
		wait_until 30 test_dra_slice_published || true
		expect_eq "DRA: meanwhile the driver publishes the layout in force, no device on CPU $X" "$(dra_slice_count)" "1 slices, 0 devices" "slices of $DRA_DRIVER on $NODE"
		# shellcheck disable=SC2086 # pod names
		delete_pods $held
		if line=$(wait_log "$AGENT_OFF" 'msg="pending pool config taken' 60); then
			pass "DRA: pods deleted: the agent takes the dra layout" "agent log: ${line#*msg=}"
		else
			fail "DRA: pods deleted: the agent takes the dra layout" "no msg=\"pending pool config taken\" within 60s"
		fi
	fi
	wait_until 60 test_dra_slice || true
	expect_eq "DRA: the driver's ResourceSlice lists CPU $X with its NUMA node" "$(dra_slice_devices | head -n1 | cut -d' ' -f1-3)" \
		"cpu-$X $X $(numa_of "$X")" "device cpus numaNode"
	expect_eq "DRA: the device plugin does not advertise the DRA pool" "$(node_res capacity podfence.io/exclusive_d)" "<none>" "capacity podfence.io/exclusive_d"
	prove_dra_slice_policy

	kc apply -f - >/dev/null <<<"$(dra_template_yaml)" || fail "DRA: ResourceClaimTemplate stored" "kubectl apply failed"
	mkdir -p "$RUN/pods"
	dra_pod_yaml dra-1 >"$RUN/pods/dra-1.yaml"
	if ! out=$(kc apply -f "$RUN/pods/dra-1.yaml" 2>&1) || ! wait_running dra-1; then
		fail "DRA: a pod with a claim for one exclusive CPU runs" "${out} ${LAUNCH_ERR[dra-1]:-}; claim: $(kc get resourceclaims -n "$NS" -o wide 2>&1 | tail -n +2 | tr '\n' ';')"
		return 0
	fi
	uid=$(dra_claim_of dra-1)
	pass "DRA: a pod with a claim for one exclusive CPU runs" "claim $uid allocated $(dra_claim_device dra-1)"
	expect_eq "DRA: the scheduler allocated device cpu-$X of the driver" "$(dra_claim_device dra-1)" "$DRA_DRIVER/cpu-$X" "driver/device"
	expect_eq "DRA: the driver's grant on the node" \
		"$(jq -c '{exclusive, podUIDs: (.podUIDs | length)}' "$DRA_GRANTS/$uid.json" 2>&1)" "{\"exclusive\":{\"exclusive_d\":\"$X\"},\"podUIDs\":1}" "grant $uid.json"
	expect_eq "DRA: the driver's CDI spec sets the claim marker" \
		"$(jq -r '.devices[0].containerEdits.env[0]' "$DRA_CDI/$DRA_DRIVER-$uid.json" 2>&1)" "PODFENCE_CLAIM_${uid//-/_}=$uid" "CDI env"
	expect_ctr "DRA: cgroup cpuset = the prepared CPU" dra-1 cpuset.cpus="$X" Cpus_allowed_list="$X"
	expect_env "DRA: env" dra-1 EXCLUSIVE_CPUS="$X" "PODFENCE_CLAIM_${uid//-/_}=$uid"

	dra_pod_yaml dra-2 >"$RUN/pods/dra-2.yaml"
	kc apply -f "$RUN/pods/dra-2.yaml" >/dev/null 2>&1
	wait_until 30 test_unschedulable dra-2 || true
	expect_eq "DRA: a second claim pod waits (CPU $X is never given twice)" \
		"$(pod_get dra-2 '{.status.phase} {.status.conditions[?(@.type=="PodScheduled")].reason}')" "Pending Unschedulable" "phase, PodScheduled"

	# Restarts move nothing: the agent and driver pods replaced, then the kubelet.
	pid=$(ctr_pid dra-1 || true)
	old=$AGENT_UID off=$(log_lines)
	kc delete pod -n "$PF_NS" "$AGENT_POD" "$DRA_POD" --wait=false >/dev/null 2>&1
	if agent_wait "$old" "$off" && dra_wait "$DRA_UID"; then
		expect_ctr "DRA: agent and driver restarted: the claim pod did not move" dra-1 pid="$pid" cpuset.cpus="$X" Cpus_allowed_list="$X"
	else
		fail "DRA: agent and driver restarted" "$AGENT_WAIT_ERR driver pods: $(kc get pods -n "$PF_NS" -l "$DRA_SEL" -o wide 2>&1 | tail -n +2 | tr '\n' ';')"
	fi
	bg_stop kubelet 15
	kubelet_start || fail "DRA: kubelet restart" "not healthy within 60s"
	wait_until 30 test_running dra-1 || true
	expect_ctr "DRA: kubelet restarted: the claim pod did not move" dra-1 pid="$pid" cpuset.cpus="$X" Cpus_allowed_list="$X"
	expect_eq "DRA: kubelet restarted: the grant is the same" \
		"$(jq -r '.exclusive.exclusive_d' "$DRA_GRANTS/$uid.json" 2>&1)" "$X" "grant $uid.json"

	# Delete: the claim is unprepared (grant and CDI file gone) and the waiting pod gets CPU X.
	delete_pods dra-1
	wait_until 30 test_no_file "$DRA_GRANTS/$uid.json" || true
	expect_eq "DRA: pod deleted: the driver removed the grant and the CDI spec" \
		"$(find "$DRA_GRANTS/$uid.json" "$DRA_CDI/$DRA_DRIVER-$uid.json" 2>/dev/null | wc -l)" 0 "files left"
	if wait_running dra-2; then
		expect_ctr "DRA: freed: the waiting claim pod runs on CPU $X" dra-2 cpuset.cpus="$X" Cpus_allowed_list="$X"
	else
		fail "DRA: freed: the waiting claim pod runs on CPU $X" "${LAUNCH_ERR[dra-2]}"
	fi
	# dra-2 runs on: it is the pod whose CPUs the uninstall proof finds kept.
	# shellcheck disable=SC2034 # uninstall.sh's
	UNINSTALL_POD=dra-2 UNINSTALL_DRA=1
}
test_unschedulable() { [[ $(pod_get "$1" '{.status.conditions[?(@.type=="PodScheduled")].reason}') == Unschedulable ]]; }

# as_dra TOKEN METHOD PATH [BODY]: a request to the API server with TOKEN, as the driver's
# slice controller sends it; DRA_OUT is "<status> <the Status message or kind/name>".
DRA_OUT=""
as_dra() {
	local code
	code=$(curl -s --cacert "$RUN/pki/ca.crt" -H "Authorization: Bearer $1" -X "$2" -H 'Content-Type: application/json' \
		${4:+-d "$4"} -o "$RUN/dra-policy.out" -w '%{http_code}' "https://127.0.0.1:$API_PORT/apis/resource.k8s.io/v1/resourceslices$3") || true
	DRA_OUT="${code:-000} $(jq -r 'if .kind == "Status" then .message else "\(.kind)/\(.metadata.name)" end' "$RUN/dra-policy.out" 2>/dev/null)"
	[[ $code == 20? ]]
}

# dra_slice_json NAME DRIVER NODE: a ResourceSlice of one device on NODE ("" for all nodes).
dra_slice_json() {
	jq -cn --arg n "$1" --arg d "$2" --arg node "$3" '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice",
	  metadata: {name: $n}, spec: ({driver: $d, pool: {name: "e2e-policy", generation: 1, resourceSliceCount: 1},
	  devices: [{name: "e2e-0"}]} + (if $node == "" then {allNodes: true} else {nodeName: $node} end))}'
}

# expect_dra_denied WHAT TOKEN NAME DRIVER NODE ERE: creating the slice is refused (403) by the
# policy with a message matching ERE.
expect_dra_denied() {
	if as_dra "$2" POST "" "$(dra_slice_json "$3" "$4" "$5")"; then
		fail "$1" "created ($DRA_OUT); want it denied matching /$6/"
		as_dra "$2" DELETE "/$3" >/dev/null || kc delete resourceslice "$3" >/dev/null 2>&1 || true
	elif grep -qE -- "^403 .*ValidatingAdmissionPolicy 'podfence-dra-resourceslices' .*denied request: .*$6" <<<"$DRA_OUT"; then
		pass "$1" "$DRA_OUT"
	else
		fail "$1" "refused without /$6/: $DRA_OUT"
	fi
}

# prove_dra_slice_policy: deploy/dra/resourceslice-policy.yaml and rbac.yaml in the real API
# server. The driver pod's projected token (bound to its pod and NODE) creates and deletes a
# ResourceSlice of NODE; the same token is refused a slice of another node, one for all
# nodes and one of another driver, and its list of slices still works (RBAC); a token of the
# same ServiceAccount without node claim is refused a slice of NODE. The agent's
# ServiceAccount may write no slice, the driver's may not patch Nodes.
prove_dra_slice_policy() {
	local bound claim tok sa="system:serviceaccount:$PF_NS"
	if ! bound=$(kc exec -n "$PF_NS" "$DRA_POD" -c podfence-dra -- cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>&1); then
		fail "DRA slice policy: the driver pod's token" "kubectl exec $DRA_POD -- cat the token: $bound"
		return 0
	fi
	kubeconfig "$RUN/dra.kubeconfig" "$bound"
	claim=$(kubectl --kubeconfig "$RUN/dra.kubeconfig" auth whoami -o json 2>&1 | jq -r '.status.userInfo | "\(.username) node-name=\(.extra["authentication.kubernetes.io/node-name"] // [] | join(","))"' 2>&1)
	expect_eq "DRA slice policy: the driver pod's token is its own ServiceAccount's, bound to $NODE" "$claim" \
		"$sa:podfence-dra node-name=$NODE" "whoami"
	if as_dra "$bound" POST "" "$(dra_slice_json pf-e2e-own "$DRA_DRIVER" "$NODE")" && as_dra "$bound" DELETE /pf-e2e-own; then
		pass "DRA slice policy: the driver's token creates and deletes a ResourceSlice of its own node" "create, delete as podfence-dra: $DRA_OUT"
	else
		fail "DRA slice policy: the driver's token creates and deletes a ResourceSlice of its own node" "$DRA_OUT"
		kc delete resourceslice pf-e2e-own --ignore-not-found >/dev/null 2>&1 || true
	fi
	expect_dra_denied "DRA slice policy: a slice of another node is denied" "$bound" pf-e2e-other "$DRA_DRIVER" pf-e2e-other-node \
		"may write only the ResourceSlices of its own node: its token is bound to node $NODE, this slice is of node pf-e2e-other-node"
	expect_dra_denied "DRA slice policy: a slice for all nodes is denied" "$bound" pf-e2e-all "$DRA_DRIVER" "" \
		"this slice is not of one node"
	expect_dra_denied "DRA slice policy: a slice of another driver on its node is denied" "$bound" pf-e2e-gpu gpu.example.com "$NODE" \
		"may write only ResourceSlices of driver dra.podfence.io, not of gpu.example.com"
	if tok=$(kc create token podfence-dra -n "$PF_NS" --duration 10m 2>&1); then
		expect_dra_denied "DRA slice policy: a token without node claim is denied, even for $NODE" "$tok" pf-e2e-unbound "$DRA_DRIVER" "$NODE" \
			"its token names no node"
	else
		fail "DRA slice policy: a token without node claim is denied" "no token: $tok"
	fi
	expect_eq "DRA slice policy: RBAC: the agent writes no slice, the driver patches no Node, both read what they need" \
		"$(for a in "podfence-agent create resourceslices.resource.k8s.io" "podfence-agent get resourceclaims.resource.k8s.io" \
			"podfence-dra patch nodes" "podfence-dra create resourceslices.resource.k8s.io" "podfence-dra list resourceclaims.resource.k8s.io"; do
			set -- $a
			printf '%s:%s:%s ' "$1" "$2" "$(kc auth can-i "$2" "$3" --as "$sa:$1" 2>/dev/null)"
		done)" \
		"podfence-agent:create:no podfence-agent:get:no podfence-dra:patch:no podfence-dra:create:yes podfence-dra:list:yes " "kubectl auth can-i"
	expect_eq "DRA slice policy: denied requests left nothing" \
		"$(kc get resourceslices -o name 2>&1 | grep -c pf-e2e-)" 0 "slices named pf-e2e-*"
}
