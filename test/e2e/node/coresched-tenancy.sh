# shellcheck shell=bash
# Proof: core-scheduling groups belong to their namespace (docs/tenancy.md). The profiles
# ($RUN/profiles.yaml: the overlay's ConfigMap, mounted by webhook and agent) share group
# e2e-group among namespace NS only. A pod of a second namespace naming e2e-group, by
# podfence's label or Koordinator's, is refused at `kubectl apply` by the webhook's /validate;
# in NS the same label is admitted, and in the second namespace a name no profile shares is
# its own. A pod that a profile selects may not name another group. The agent, given the same
# profiles, reports the shared group in /state (read with metrics-auth.sh's reader token).
# Pods are never bound (no core scheduling on this host; pod_yaml with NODE empty names a
# scheduler nobody runs) and deleted. Sourced by run.sh after facts.sh, pods.sh and
# metrics-auth.sh.

TENANT_NS=pf-e2e-tenant-b
SHARED_GROUP=e2e-group # cluster-setup.sh's profile e2e: namespaces [NS], group e2e-group

# expect_tenancy_refused WHAT NAME NAMESPACE LABELS ERE: kubectl apply of an unbound pod must
# fail with a message matching ERE.
expect_tenancy_refused() {
	if apply "$2" "" "{}" "$4" "$3"; then
		fail "$1" "kubectl apply succeeded; want it refused matching /$5/"
		kc delete pod -n "$3" "$2" --wait=false >/dev/null 2>&1 || true
	elif grep -qE -- "$5" <<<"$APPLY_OUT"; then
		pass "$1" "kubectl apply: $(tr '\n' ' ' <<<"$APPLY_OUT" | sed 's/^Error from server: //; s/ *$//')"
	else
		fail "$1" "kubectl apply failed without /$5/: $APPLY_OUT"
	fi
}

# expect_tenancy_admitted WHAT NAME NAMESPACE LABELS KEY=VALUE: the pod is stored, with the
# label KEY=VALUE; deleted after.
expect_tenancy_admitted() {
	local got
	if ! apply "$2" "" "{}" "$4" "$3"; then
		fail "$1" "kubectl apply refused it: $APPLY_OUT"
		return 0
	fi
	got=$(kc get pod -n "$3" "$2" -o json | jq -r --arg k "${5%%=*}" '.metadata.labels[$k] // "<none>"')
	expect_eq "$1" "$got" "${5#*=}" "stored pod $3/$2: ${5%%=*}"
	kc delete pod -n "$3" "$2" --wait=true --timeout=30s >/dev/null 2>&1 || pf_log "warning: kubectl delete pod $3/$2 did not finish"
}

prove_coresched_tenancy() {
	local msg want
	kc create namespace "$TENANT_NS" >/dev/null
	wait_until 30 kc get serviceaccount default -n "$TENANT_NS" || pf_log "warning: no ServiceAccount default in $TENANT_NS after 30s"
	msg="namespace \"$TENANT_NS\" may not join core-scheduling group $SHARED_GROUP, which the core-scheduling profiles share among namespaces $NS only"

	expect_tenancy_refused "tenancy: a pod of $TENANT_NS naming $NS's shared group is refused" \
		tenant-b-group "$TENANT_NS" "{podfence.io/core-sched-group: $SHARED_GROUP}" \
		"denied the request: label podfence.io/core-sched-group=\"$SHARED_GROUP\": $msg"
	expect_tenancy_refused "tenancy: the same with Koordinator's label is refused" \
		tenant-b-koord "$TENANT_NS" "{koordinator.sh/core-sched-group-id: $SHARED_GROUP}" \
		"denied the request: label koordinator.sh/core-sched-group-id=\"$SHARED_GROUP\": $msg"
	expect_tenancy_admitted "tenancy: in $NS, which the profile lists, the same label is admitted" \
		tenant-a-group "$NS" "{podfence.io/core-sched-group: $SHARED_GROUP}" "podfence.io/core-sched-group=$SHARED_GROUP"
	expect_tenancy_admitted "tenancy: in $NS, Koordinator's label is admitted too" \
		tenant-a-koord "$NS" "{koordinator.sh/core-sched-group-id: $SHARED_GROUP}" "koordinator.sh/core-sched-group-id=$SHARED_GROUP"
	expect_tenancy_admitted "tenancy: in $TENANT_NS, a group name no profile shares is the namespace's own" \
		tenant-b-own "$TENANT_NS" "{podfence.io/core-sched-group: b-group}" "podfence.io/core-sched-group=b-group"
	expect_tenancy_refused "tenancy: a pod the profile selects may not name another group" \
		tenant-a-escape "$NS" "{podfence-e2e/coresched: \"on\", podfence.io/core-sched-group: b-group}" \
		"denied the request: label podfence.io/core-sched-group=\"b-group\": core-scheduling profile [0-9]+ \\(e2e\\) selects this pod"

	# The agent reads the same profiles: its node report lists the shared group.
	if [[ -z ${METRICS_READER_TOKEN:-} ]]; then
		fail "tenancy: the agent reports the shared groups in /state" "no reader token (metrics auth checks failed)"
		return 0
	fi
	want="{\"$SHARED_GROUP\":[\"$NS\"]}"
	if [[ $(metrics_get /state "$METRICS_READER_TOKEN") == 200* ]] &&
		[[ $(jq -c '.extensions.coresched.sharedGroups' "$RUN/metrics.body") == "$want" ]]; then
		pass "tenancy: the agent (--coresched-profiles) reports the shared groups in /state" \
			"extensions.coresched: $(jq -c '.extensions.coresched | {supported, defaultGroup, sharedGroups}' "$RUN/metrics.body")"
	else
		fail "tenancy: the agent (--coresched-profiles) reports the shared groups in /state" \
			"$(head -c 300 "$RUN/metrics.body" | tr '\n' ' '); extensions.coresched.sharedGroups: $(jq -c '.extensions.coresched.sharedGroups' "$RUN/metrics.body" 2>&1) (want $want)"
	fi
}
