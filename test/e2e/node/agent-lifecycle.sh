# shellcheck shell=bash
# Proof: the agent's pod can go away and come back, and be replaced by another image, without
# moving a running container. With the shared pool config in force, a shared pod (400
# millicpu) and a default pod run; then (1) the agent pod is deleted and the DaemonSet makes
# another, (2) the overlay's image tag becomes e2e-2 (another build: main.version e2e-2) and
# `kubectl apply -k` rolls the DaemonSet and the webhook Deployment. After each, both
# containers keep their process, cpuset, affinity and CFS quota as the kernel shows them, the
# kubelet keeps the shared pod's devices, and the new agent synchronizes with the runtime and
# registers its device plugin again; after the rollout it says version e2e-2, and the webhook's
# new replicas admit the next pool pod. The shared pod stays running for uninstall.sh.
# Sourced by run.sh after agent.sh, pods.sh and facts.sh; runs after the shared-pool checks.

LIFE_QUOTA=40000 # 400 millicpu per 100000 us

# expect_unmoved WHAT SHARED_PID DEFAULT_PID: the lifecycle pods as they were.
expect_unmoved() {
	expect_ctr "$1: the shared pod did not move" life-shr pid="$2" cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=$LIFE_QUOTA
	expect_ctr "$1: the default pod did not move" life-def pid="$3" cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1
	expect_eq "$1: the kubelet keeps the shared pod's devices" \
		"$(allocated podfence.io/shared_s life-shr | tr ',' '\n' | grep -c .)" 400 "podfence.io/shared_s devices of life-shr"
}

# webhook_images: the images of the webhook pods not being deleted, sorted.
webhook_images() {
	kc get pods -n "$PF_NS" -l "$WEBHOOK_SEL" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .spec.containers[0].image] | sort | join(" ")'
}
test_webhook_images() { [[ $(webhook_images) == "$1" ]]; }

# expect_agent_back WHAT OLD_UID OFFSET: a new agent pod, synchronized, its device plugin registered.
expect_agent_back() {
	local line
	if ! agent_wait "$2" "$3"; then
		fail "$1: a new agent pod synchronizes" "$AGENT_WAIT_ERR"
		return 1
	fi
	line=$(wait_log "$3" 'msg=synchronized' 1)
	pass "$1: a new agent pod synchronizes" "pod $AGENT_POD (uid ${AGENT_UID:0:8}, was ${2:0:8}), image $(agent_image); agent log: $(log_msg "$line")"
	expect_log "$1: the device plugin registers again" "$3" "msg=\"registered with the kubelet\".*resource=podfence.io/shared_s" 30
}

prove_agent_lifecycle() {
	local shr def old off out
	launch_pod "lifecycle: shared pod (400 millicpu) runs" life-shr "$NODE" '{podfence.io/shared_s: "400"}' || return 0
	launch_pod "lifecycle: default pod runs" life-def "$NODE" "{}" || return 0
	shr=$(ctr_pid life-shr) def=$(ctr_pid life-def)
	expect_ctr "lifecycle: the shared pod on shared_s" life-shr cpuset.cpus="$X" cpu.cfs_quota_us=$LIFE_QUOTA
	expect_ctr "lifecycle: the default pod on the default pool" life-def cpuset.cpus="$DEF" cpu.cfs_quota_us=-1

	# (1) The agent pod deleted: the DaemonSet controller makes another.
	old=$AGENT_UID off=$(log_lines)
	if out=$(kc delete pod -n "$PF_NS" "$AGENT_POD" --wait=false 2>&1); then
		expect_agent_back "agent pod deleted" "$old" "$off" && expect_unmoved "agent pod deleted" "$shr" "$def"
	else
		fail "agent pod deleted" "kubectl delete pod $AGENT_POD: $out"
	fi

	# (2) A new image tag, as an operator rolls one out: the overlay's images: entry, applied.
	old=$AGENT_UID off=$(log_lines)
	# shellcheck disable=SC2034 # overlay_write's
	OVERLAY_TAG=e2e-2
	overlay_write
	if out=$(kc apply -k "$OVERLAY" 2>&1); then
		if expect_agent_back "rollout to image tag e2e-2" "$old" "$off"; then
			expect_log "rollout to image tag e2e-2: the new agent is version e2e-2" "$off" 'msg=starting version=e2e-2 ' 5
			expect_unmoved "rollout to image tag e2e-2" "$shr" "$def"
		fi
	else
		fail "rollout to image tag e2e-2" "kubectl apply -k: $(tr '\n' ' ' <<<"$out")"
	fi
	if kc rollout status deploy/podfence-webhook -n "$PF_NS" --timeout=180s >/dev/null 2>&1 && wait_until 30 test_endpoints 2 &&
		wait_until 60 test_webhook_images "$REGISTRY/podfence:e2e-2 $REGISTRY/podfence:e2e-2"; then
		pass "rollout to image tag e2e-2: the webhook Deployment rolled" \
			"pods $(webhook_images); endpoints $(kc get endpoints podfence-webhook -n "$PF_NS" -o jsonpath='{range .subsets[*].addresses[*]}{.ip} {end}')"
	else
		fail "rollout to image tag e2e-2: the webhook Deployment rolled" "$(kc get pods -n "$PF_NS" -l "$WEBHOOK_SEL" -o wide 2>&1 | tail -n +2 | tr '\n' ';')"
	fi
	if launch_pod "after the rollout: a shared pod (200 millicpu) runs" life-shr-2 "$NODE" '{podfence.io/shared_s: "200"}'; then
		expect_stored "after the rollout: the new webhook writes cpu-pools" life-shr-2 a:podfence.io/cpu-pools='{"app":{"shared_s":200}}'
		expect_ctr "after the rollout: the new agent places it" life-shr-2 cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=20000
	fi
	delete_pods life-shr-2 life-def
}
