# shellcheck shell=bash
# Proof: isolation beyond the cpuset on the host's real kernel, by deploy/'s agent pod as
# shipped (no capability added for it). Pools default=DEF and exclusive_a=X. A pod asking for
# exclusive_a with CRI-O's irq-load-balancing.crio.io: disable and podfence's
# cpu-load-balancing: disable runs; while it runs no movable IRQ's affinity
# (/proc/irq/<n>/smp_affinity_list) nor default_smp_affinity holds CPU X; its isolated
# partition is reported degraded with the kernel's reason (this host is cgroup v1: an Event
# IsolationDegraded on the pod); when it is deleted every IRQ has its affinity of before back.
# Sourced by run.sh after exclusive-pool.sh.

# irq_affinities: "<irq>=<smp_affinity_list>" for every IRQ of the host, one line each.
irq_affinities() {
	local d
	for d in /proc/irq/[0-9]*; do printf '%s=%s\n' "${d##*/}" "$(cat "$d/smp_affinity_list")"; done
}

# irqs_holding CPU: the IRQs whose affinity holds CPU (from irq_affinities on stdin).
irqs_holding() {
	local line irq list
	while IFS='=' read -r irq list; do
		[[ " $(cpulist_expand "$list" | tr "\n" " ") " == *" $1 "* ]] && printf '%s ' "$irq"
	done
	true
}

prove_isolation() {
	local before during after held unmovable ev dflt
	before=$(irq_affinities)
	if ! launch_pod "isolation: an exclusive pod asking for no interrupts and no load balancing runs" iso "$NODE" \
		'{podfence.io/exclusive_a: "1"}' "{}" "$NS" '{irq-load-balancing.crio.io: "disable", podfence.io/cpu-load-balancing: "disable"}'; then
		return 0
	fi
	expect_ctr "isolation: the pod runs on CPU $X" iso cpuset.cpus="$X"
	during=$(irq_affinities)
	held=$(irqs_holding "$X" <<<"$during")
	# The kernel refuses to move some (managed, per-CPU): the agent logs each once.
	unmovable=$(grep -ao 'the kernel does not let this interrupt move.*irq=[0-9]*' "$AGENT_LOG" | sed 's/.*irq=//' | sort -nu | tr '\n' ' ')
	local stray="" i
	for i in $held; do [[ " $unmovable " == *" $i "* ]] || stray+="$i "; done
	dflt=$(cat /proc/irq/default_smp_affinity)
	if [[ -z $stray ]] && (((16#${dflt//,/} >> X & 1) == 0)); then
		pass "isolation: while it runs no movable IRQ may reach CPU $X" \
			"$(wc -l <<<"$during") IRQs; holding CPU $X: ${held:-none} (unmovable, logged: ${unmovable:-none}); default_smp_affinity $dflt; e.g. $(head -n 3 <<<"$during" | tr '\n' ' ')"
	else
		fail "isolation: while it runs no movable IRQ may reach CPU $X" "movable IRQs still on CPU $X: ${stray:-none}; default_smp_affinity $dflt"
	fi
	wait_until 45 test_iso_event || true
	ev=$(kc get events -n "$NS" --field-selector involvedObject.name=iso,reason=IsolationDegraded -o jsonpath='{.items[0].message}' 2>/dev/null)
	if [[ $ev == *"load balancing: cgroup v1"* ]]; then
		pass "isolation: cgroup v1 here: the partition is reported degraded with the reason" "Event IsolationDegraded: $ev"
	else
		fail "isolation: cgroup v1 here: the partition is reported degraded with the reason" "Event IsolationDegraded: ${ev:-<none>}"
	fi
	delete_pods iso
	after=$(irq_affinities)
	if [[ $after == "$before" ]]; then
		pass "isolation: the pod deleted, every IRQ has its affinity of before" "$(wc -l <<<"$after") IRQs equal; default_smp_affinity $(cat /proc/irq/default_smp_affinity)"
	else
		fail "isolation: the pod deleted, every IRQ has its affinity of before" "differ: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')"
	fi
}
test_iso_event() {
	[[ -n $(kc get events -n "$NS" --field-selector involvedObject.name=iso,reason=IsolationDegraded -o name 2>/dev/null) ]]
}
