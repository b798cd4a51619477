# shellcheck shell=bash
# Proof: an exclusive pool end to end through Kubernetes. Pools default=DEF and
# exclusive_a=X (poolconfig-exclusive.yaml, the agent on node label podfence-e2e/pools=exclusive).
# A pod asking for podfence.io/exclusive_a goes through the webhook (stored cpu-pools), the
# agent's device plugin (node capacity, the kubelet's Allocate, pod-resources), the runtime
# (the exclusive-cpus annotation) and the kernel (cpuset, affinity, env); the kubelet's
# device accounting refuses a second one; the webhook refuses what the agent could not serve;
# EPC and core-scheduling mutations; the CPU is freed on delete; a kubelet restart moves
# nothing. Sourced by run.sh after facts.sh and pods.sh.

# decided_quota NAME: the CFS quota the agent decided for container app of pod NAME (its
# msg=decision line), as cgroupfs shows it: -1 for none. (The policy is the planner's, tested
# there; this proves the kernel got it.)
decided_quota() {
	local q
	q=$(grep -a "msg=decision event=CreateContainer pod=$NS/$1 container=app " "$AGENT_LOG" | tail -n1 | sed -n 's/.* quota=\([0-9]*\) .*/\1/p')
	if [[ -z $q || $q == 0 ]]; then echo -1; else echo "$q"; fi
}

prove_exclusive_pool() {
	local ids pid
	expect_log "device plugin: registered with the kubelet" 0 "msg=\"registered with the kubelet\".*resource=podfence.io/exclusive_a" 30
	expect_capacity "node: the device plugin advertises exclusive_a (one device per CPU)" podfence.io/exclusive_a 1 1
	expect_eq "kubelet: pod-resources lists the allocatable devices" \
		"$(podres | jq -r '[.allocatable[] | select(.resource == "podfence.io/exclusive_a") | .ids[]] | join(",")')" "$X" "podfence.io/exclusive_a devices"
	expect_eq "kubelet reservation: allocatable cpu = capacity - pooled CPUs (systemReserved cpu=$POOLED)" \
		"$(node_res capacity cpu)/$(node_res allocatable cpu)" "$NCPU/$((NCPU - POOLED))" "capacity/allocatable cpu"
	expect_node_info

	# The webhook's own namespace is excluded from its configurations: there the agent is
	# the last line. It refuses the container and says so with an Event (deploy/'s RBAC).
	if apply refused "$NODE" "{}" "{}" podfence-system '{podfence.io/cpu-pools: "{not json"}'; then
		expect_refusal_event "bad annotation where the webhook does not look: the agent refuses, with an Event" refused
		kc delete pod -n podfence-system refused --wait=true --timeout=60s >/dev/null 2>&1 || true
	else
		fail "refused pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# A pod asking for no pool: default pool, nothing written by the webhook.
	if launch_pod "default pod runs" def "$NODE" "{}"; then
		expect_stored "default pod: the webhook adds no pool annotation" def a:podfence.io/cpu-pools="<none>"
		expect_ctr "default pod: default pool" def cpuset.cpus="$DEF" Cpus_allowed_list="$DEF" cpu.cfs_quota_us=-1
		expect_env "default pod: no pool env" def EXCLUSIVE_CPUS="<unset>" SHARED_CPUS="<unset>"
	fi

	# Exclusive: webhook → device plugin Allocate → annotation → NRI cpuset.
	if launch_pod "exclusive pod runs" excl "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_stored "exclusive pod: the webhook writes cpu-pools" excl a:podfence.io/cpu-pools='{"app":{"exclusive_a":1}}'
		ids=$(allocated podfence.io/exclusive_a excl)
		expect_eq "exclusive pod: the kubelet allocated one device of exclusive_a" "$ids" "$X" "device IDs"
		expect_eq "exclusive pod: Allocate's annotation reached the runtime" \
			"$(runtime_annotation excl podfence.io/exclusive-cpus)" "$ids" "podfence.io/exclusive-cpus"
		expect_ctr "exclusive pod: cgroup cpuset = the allocated device IDs, CFS quota = the agent's decision" excl \
			cpuset.cpus="$ids" Cpus_allowed_list="$ids" cpu.cfs_quota_us="$(decided_quota excl)"
		expect_eq "exclusive pod: whole cores (no SMT here: one thread per core)" "$(whole_cores "$ids")" yes "whole cores"
		expect_env "exclusive pod: env" excl EXCLUSIVE_CPUS="$ids" SHARED_CPUS="<unset>"
		expect_allocated "exclusive pod: node allocation" podfence.io/exclusive_a 1
		expect_log "device plugin: Allocate answered with the CPUs" 0 "msg=allocated .*resource=podfence.io/exclusive_a .*EXCLUSIVE_CPUS:$X" 5
	fi

	# Capacity is enforced by the kubelet's device accounting.
	if apply excl-2 "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_admission_refused "second exclusive pod while CPU $X is allocated: the kubelet refuses it" excl-2 podfence.io/exclusive_a
	else
		fail "second exclusive pod: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# The webhook refuses what the agent could not serve.
	expect_refused_apply "webhook refuses an unknown pool" bad-pool 'denied the request.*exclusive_zz' '{podfence.io/exclusive_zz: "1"}'
	expect_refused_apply "webhook refuses a fractional exclusive request" bad-frac 'denied the request.*whole number' '{podfence.io/exclusive_a: "1500m"}'

	# EPC and core scheduling: the webhook's mutation only (the pod is never bound: no SGX,
	# no core scheduling on this host).
	if apply meta "" '{sgx.intel.com/epc: "1Mi"}' '{podfence-e2e/coresched: "on"}'; then
		expect_stored "EPC limit and core-sched profile: the webhook's mutation" meta \
			a:epc-limit.nri.io/container.app=1048576 l:podfence.io/core-sched-group=e2e-group a:podfence.io/cpu-pools="<none>"
	else
		fail "EPC limit and core-sched profile: stored" "kubectl apply failed: $APPLY_OUT"
	fi

	# Deleting frees the CPU: the next exclusive pod gets it.
	delete_pods excl excl-2 meta
	expect_allocated "exclusive pod deleted: allocation back to 0" podfence.io/exclusive_a 0
	if launch_pod "freed CPU: a new exclusive pod runs" excl-3 "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_ctr "freed CPU: the new exclusive pod gets CPU $X" excl-3 cpuset.cpus="$X" Cpus_allowed_list="$X"
	fi

	# Kubelet restart: it wipes its device-plugin dir; the agent serves and registers again.
	pid=$(ctr_pid excl-3 || true)
	local off
	off=$(log_lines)
	bg_stop kubelet 15
	kubelet_start || fail "kubelet restart" "not healthy within 60s"
	expect_log "kubelet restart: the device plugin registers again" "$off" "msg=\"registered with the kubelet\".*resource=podfence.io/exclusive_a" 30
	expect_capacity "kubelet restart: exclusive_a advertised again" podfence.io/exclusive_a 1 1
	expect_ctr "kubelet restart: the exclusive pod did not move" excl-3 pid="$pid" cpuset.cpus="$X" Cpus_allowed_list="$X"
	# (pod-resources lists a pod once the restarted kubelet has it from the API server again)
	wait_until 30 test_allocated_ids podfence.io/exclusive_a excl-3 "$X" || true
	expect_eq "kubelet restart: the allocation survives" "$(allocated podfence.io/exclusive_a excl-3)" "$X" "device IDs"

	delete_pods def excl-3
	expect_allocated "exclusive-pool pods deleted: allocation back to 0" podfence.io/exclusive_a 0
}
