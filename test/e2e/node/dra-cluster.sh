# shellcheck shell=bash
# Smoke check of the cluster under the DRA checks (dra.sh), for run.sh on Kubernetes >= 1.34
# (pf_k8s_at_least 1.34: DRA GA), right after the kubelet is up: resource.k8s.io/v1 is served
# (DeviceClass, ResourceClaim, ResourceSlice), a DeviceClass can be made and deleted,
# DRAConsumableCapacity is on in the API server and the kubelet (feature_gates in cluster.sh)
# and the API server keeps a ResourceSlice's consumable-capacity fields (it drops them when the
# gate is off), and the node has the kubelet's plugin registry and plugins dir where DRA
# drivers put their sockets. Sourced after cluster.sh, node.sh and facts.sh; uses NODE.

DRA_SMOKE_DRIVER=smoke.podfence-e2e.io
DRA_SMOKE=pf-e2e-dra-smoke # the DeviceClass and ResourceSlice made and deleted here

# dra_api_resources: "name apiVersion" of each resource of group resource.k8s.io, sorted.
dra_api_resources() {
	# APIVERSION is the third column from the end (SHORTNAMES may be empty).
	kc api-resources --api-group resource.k8s.io --no-headers | awk '{print $1, $(NF-2)}' | LC_ALL=C sort
}

# feature_enabled METRICS GATE: the kubernetes_feature_enabled value (1 or 0) a component
# reports for GATE in its /metrics text on stdin.
feature_enabled() { sed -n "s/^kubernetes_feature_enabled{name=\"$1\",[^}]*} \([01]\)\$/\1/p"; }

# kubelet_metrics: the kubelet's /metrics, read as the API server reads it (its kubelet client
# certificate): the API server's node proxy refuses a node on loopback ("address not allowed").
kubelet_metrics() {
	curl -sS --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/apiserver-kubelet-client.crt" \
		--key "$RUN/pki/apiserver-kubelet-client.key" --resolve "$NODE:$KUBELET_PORT:127.0.0.1" \
		"https://$NODE:$KUBELET_PORT/metrics"
}

dra_smoke_slice_yaml() {
	cat <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: $DRA_SMOKE}
spec:
  driver: $DRA_SMOKE_DRIVER
  pool: {name: smoke, generation: 1, resourceSliceCount: 1}
  allNodes: true
  devices:
    - name: shared-0
      allowMultipleAllocations: true
      capacity:
        memory: {value: 1Gi, requestPolicy: {default: 256Mi, validRange: {min: 128Mi}}}
YAML
}

prove_dra_cluster() {
	local got want out gone
	got=$(dra_api_resources | grep -E '^(deviceclasses|resourceclaims|resourceslices) ' | paste -sd, -)
	want="deviceclasses resource.k8s.io/v1,resourceclaims resource.k8s.io/v1,resourceslices resource.k8s.io/v1"
	expect_eq "DRA cluster: kubectl api-resources lists resource.k8s.io/v1" "$got" "$want" "resources"

	if out=$(kc create -f - 2>&1 <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $DRA_SMOKE}
spec:
  selectors: [{cel: {expression: 'device.driver == "$DRA_SMOKE_DRIVER"'}}]
YAML
	) && got=$(kc get deviceclass "$DRA_SMOKE" -o jsonpath='{.spec.selectors[0].cel.expression}') &&
		out=$(kc delete deviceclass "$DRA_SMOKE" --wait 2>&1) &&
		gone=$(kc get deviceclass "$DRA_SMOKE" 2>&1 || true) && [[ $gone == *NotFound* ]]; then
		pass "DRA cluster: a DeviceClass is created and deleted" "stored selector: $got; after delete: $gone"
	else
		fail "DRA cluster: a DeviceClass is created and deleted" "${out:-} ${gone:-}"
		kc delete deviceclass "$DRA_SMOKE" --ignore-not-found >/dev/null 2>&1 || true
	fi

	expect_eq "DRA cluster: DRAConsumableCapacity on" \
		"kube-apiserver=$(kc get --raw /metrics | feature_enabled DRAConsumableCapacity) kubelet=$(kubelet_metrics | feature_enabled DRAConsumableCapacity)" \
		"kube-apiserver=1 kubelet=1" "kubernetes_feature_enabled"
	if out=$(kc create -f - 2>&1 <<<"$(dra_smoke_slice_yaml)"); then
		got=$(kc get resourceslice "$DRA_SMOKE" -o jsonpath='{.spec.devices[0].allowMultipleAllocations} {.spec.devices[0].capacity.memory.requestPolicy.default}' 2>&1)
		expect_eq "DRA cluster: a ResourceSlice keeps its consumable capacity" "$got" "true 256Mi" \
			"allowMultipleAllocations requestPolicy.default"
	else
		fail "DRA cluster: a ResourceSlice keeps its consumable capacity" "kubectl create: $out"
	fi
	kc delete resourceslice "$DRA_SMOKE" --ignore-not-found >/dev/null 2>&1 || true

	got=$(node_ns ls -d /var/lib/kubelet/plugins /var/lib/kubelet/plugins_registry 2>&1 | paste -sd' ' -)
	expect_eq "DRA cluster: the node has the kubelet's plugin registry and plugins dir" "$got" \
		"/var/lib/kubelet/plugins /var/lib/kubelet/plugins_registry" "dirs (ls order)"
}
