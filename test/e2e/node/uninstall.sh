# shellcheck shell=bash
# Proof: `kubectl delete -k` of the overlay uninstalls podfence from the API server (its
# namespace, ServiceAccounts, RBAC, webhook configurations, the ValidatingAdmissionPolicy), and
# its containers end; then what stays on the node is found and compared with the README's
# "Uninstall: what stays" (UNINSTALL_STAYS): podfence writes these and nothing removes them.
# A pod podfence placed runs throughout (UNINSTALL_POD: the shared pod of agent-lifecycle.sh,
# or dra.sh's claim pod once it ran). Sourced by run.sh last.

# UNINSTALL_STAYS: what the README lists, in the order uninstall_left prints it; with the DRA
# driver (dra.sh set UNINSTALL_DRA=1), the CDI spec of the claim still prepared too.
UNINSTALL_STAYS="start-binary checkpoint node-label node-annotation node-resources container-cpus image"
UNINSTALL_POD=life-shr UNINSTALL_DRA=0

# uninstall_left: one line per podfence leftover on the node, "<item> <fact>".
uninstall_left() {
	local f
	f=$(node_ns ls /opt/podfence/bin 2>/dev/null | tr '\n' ' ')
	[[ -z $f ]] || echo "start-binary /opt/podfence/bin: ${f% }"
	f=$(node_ns find /var/lib/podfence -type f 2>/dev/null | sed 's#^/var/lib/podfence/##' | sort | tr '\n' ' ')
	[[ -z $f ]] || echo "checkpoint /var/lib/podfence: $(wc -w <<<"$f") files: $(cut -c1-120 <<<"${f% }")"
	f=$(node_ns ls /var/run/cdi 2>/dev/null | grep '^dra\.podfence\.io-' | tr '\n' ' ')
	[[ -z $f ]] || echo "dra-cdi-specs /var/run/cdi: ${f% }"
	f=$(node_ns ls /var/lib/kubelet/device-plugins 2>/dev/null | grep podfence | tr '\n' ' ')
	[[ -z $f ]] || echo "device-plugin-sockets ${f% }"
	f=$(find /sys/fs/cgroup/*/ -name 'podfence-vm-*' 2>/dev/null | tr '\n' ' ')
	[[ -z $f ]] || echo "cgroups ${f% }"
	kc get node "$NODE" -o json | jq -r '
	  (.metadata.labels | to_entries | map(select(.key | startswith("podfence.io/") and . != "podfence.io/pools")) | map("\(.key)=\(.value)")) as $l |
	  (.metadata.annotations | to_entries | map(select(.key | startswith("podfence.io/"))) | map("\(.key)=\(.value)")) as $a |
	  (.status.capacity | to_entries | map(select(.key | startswith("podfence.io/"))) | map("\(.key)=\(.value)")) as $c |
	  (.status.allocatable | to_entries | map(select(.key | startswith("podfence.io/"))) | map("\(.key)=\(.value)")) as $al |
	  (if ($l | length) > 0 then "node-label \($l | join(" "))" else empty end),
	  (if ($a | length) > 0 then "node-annotation \($a | join(" "))" else empty end),
	  (if ($c | length) > 0 then "node-resources capacity \($c | join(" ")), allocatable \($al | join(" "))" else empty end)'
	f=$UNINSTALL_POD
	if [[ -n ${CID[$f]:-} ]]; then
		echo "container-cpus pod $f: $(fact "$f" "$(ctr_pid "$f")" cpuset.cpus) cpu.cfs_quota_us=$(fact "$f" "$(ctr_pid "$f")" cpu.cfs_quota_us)"
	fi
	f=$(pf_crictl images -o json | jq -r '[.images[].repoTags[] | select(contains("/podfence:"))] | join(" ")')
	[[ -z $f ]] || echo "image $f"
}

# test_no_podfence_containers: no running container of the agent or webhook pods.
test_no_podfence_containers() { [[ -z $(pf_crictl ps -q --state running --label "io.kubernetes.pod.namespace=$PF_NS") ]]; }

prove_uninstall() {
	local out left items want=$UNINSTALL_STAYS
	((UNINSTALL_DRA)) && want=${want/checkpoint/checkpoint dra-cdi-specs}
	if ! out=$(kc delete -k "$OVERLAY" --wait=true --timeout=180s 2>&1); then
		fail "uninstall: kubectl delete -k" "$(tr '\n' ' ' <<<"$out" | cut -c1-400)"
	fi
	pass "uninstall: kubectl delete -k" "$(grep -c deleted <<<"$out") objects deleted"
	wait_until 60 test_no_podfence_containers || true
	left=$(kc get namespace "$PF_NS" --ignore-not-found -o name 2>&1; kc get clusterrole,clusterrolebinding,mutatingwebhookconfiguration,validatingwebhookconfiguration,validatingadmissionpolicy,validatingadmissionpolicybinding -l app.kubernetes.io/part-of=podfence -o name 2>&1)
	if [[ -z $left ]] && test_no_podfence_containers; then
		pass "uninstall: no podfence object in the API, no agent or webhook container" "namespace $PF_NS, ClusterRoles, bindings, webhook configurations and the ValidatingAdmissionPolicy gone"
	else
		fail "uninstall: no podfence object in the API, no agent or webhook container" "left: $(tr '\n' ' ' <<<"$left") containers: $(pf_crictl ps -q --state running --label "io.kubernetes.pod.namespace=$PF_NS" | tr '\n' ' ')"
	fi
	left=$(uninstall_left)
	items=$(awk '{print $1}' <<<"$left" | tr '\n' ' ')
	if [[ ${items% } == "$want" ]]; then
		pass "uninstall: what stays on the node is the README's list" "$(tr '\n' ';' <<<"$left" | sed 's/;$//; s/;/; /g')"
	else
		fail "uninstall: what stays on the node is the README's list" "found: ${items% } (want $want): $(tr '\n' ';' <<<"$left")"
	fi
	if ((UNINSTALL_DRA)); then
		# Its claim cannot be unprepared with the driver gone: the pod stays Terminating
		# until the end of the run (the README's advice: delete claim pods first).
		kc delete pod -n "$NS" "$UNINSTALL_POD" --wait=false >/dev/null 2>&1 || true
	else
		delete_pods "$UNINSTALL_POD"
	fi
}
