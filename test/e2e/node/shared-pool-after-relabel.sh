# shellcheck shell=bash
# Proof: the node relabelled podfence-e2e/pools=shared and the agent pod replaced
# (agent_select_pools), the agent serves the other pool config, a shared pool. Pools
# default=DEF and shared_s=X (poolconfig-shared.yaml), one device per millicpu: shared pods
# get the pool's cpuset and a CFS quota of their millicpu, the kubelet refuses a pod over the
# pool, and deleting frees it all. Runs after prove_exclusive_pool (its pods gone); sourced
# by run.sh after facts.sh, pods.sh and agent.sh.

prove_shared_pool_after_relabel() {
	agent_select_pools shared || return 0
	expect_log "agent replaced after the relabel: the other pool config, selected by node label" "$AGENT_OFF" "msg=node .*pools=\"default=$DEF shared_s=$X\""
	expect_log "device plugin after the relabel: shared_s registered" "$AGENT_OFF" "msg=\"registered with the kubelet\".*resource=podfence.io/shared_s" 30
	expect_capacity "node: the device plugin advertises shared_s (one device per millicpu)" podfence.io/shared_s 1000 1000

	if launch_pod "default pod beside the shared pool runs" def-b "$NODE" "{}"; then
		expect_ctr "default pod beside the shared pool: default pool" def-b cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1
	fi
	if launch_pod "shared pod (500 millicpu) runs" shr "$NODE" '{podfence.io/shared_s: "500"}'; then
		expect_stored "shared pod: the webhook writes cpu-pools" shr a:podfence.io/cpu-pools='{"app":{"shared_s":500}}'
		expect_eq "shared pod: the kubelet allocated 500 devices" \
			"$(allocated podfence.io/shared_s shr | tr ',' '\n' | grep -c .)" 500 "devices"
		expect_ctr "shared pod: cpuset = the shared pool, CFS quota = 500 millicpu" shr \
			cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000
		expect_env "shared pod: env" shr SHARED_CPUS="$X" EXCLUSIVE_CPUS="<unset>"
	fi
	if launch_pod "second shared pod (250 millicpu) runs" shr-2 "$NODE" '{podfence.io/shared_s: "250"}'; then
		expect_ctr "second shared pod: same pool, its own quota" shr-2 \
			cpuset.cpus="$X" Cpus_allowed_list="$X" cpu.cfs_quota_us=25000 cpu.cfs_period_us=100000
	fi
	expect_allocated "shared pods: node allocation" podfence.io/shared_s 750
	if apply shr-3 "$NODE" '{podfence.io/shared_s: "300"}'; then
		expect_admission_refused "shared pod over the pool (750 + 300 > 1000 millicpu): the kubelet refuses it" shr-3 podfence.io/shared_s
	else
		fail "third shared pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi
	delete_pods shr shr-2 shr-3 def-b
	expect_allocated "shared pods deleted: allocation back to 0" podfence.io/shared_s 0
	expect_capacity "shared pods deleted: the whole pool is allocatable" podfence.io/shared_s 1000 1000
}
