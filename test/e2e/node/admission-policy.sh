# shellcheck shell=bash
# Proof: deploy/admission-policy, podfence's pod rules as ValidatingAdmissionPolicies, on the
# real API server, with the webhook and without any. Pods are `kubectl apply`ed as server dry
# runs (the API server runs every admission step, stores nothing), one as a real pod.
#   1. the webhook alone: what it refuses, in its words (and a pod over maxEPC it admits);
#   2. deploy/ with the component admission-policy, applied as an operator applies it (a copy
#      of the run's deploy/ with the component switched on, under the run's overlay): the
#      policies deny in the webhook's words what they check before the validating webhook
#      (EPC annotations, the core-scheduling policy label), warn as it warns (Koordinator's
#      policy label), deny what only they check (the pinning annotation's pools, maxEPC), and
#      admit the pods the mutating webhook completed (cpu-pools, EPC annotations);
#   3. no webhook (components admission-policy and admission-policy/no-webhook, the webhook
#      configurations deleted as its recipe says): the pool and EPC resource rules now deny in
#      the webhook's words, podfence's own request annotations are refused, an EPC limit needs
#      its annotation, and an exclusive pod runs on its CPU from the kubelet's devices alone;
#   4. restored: the webhook configurations applied again, the policies deleted.
# Sourced by run.sh after pods.sh, facts.sh and deploy-manifests.sh; uses RUN, NS, NODE, X,
# PF_NS, OVERLAY and the run's deploy/ copy.

declare -A VAP_WEBHOOK=() # case -> the webhook's refusal (or warning) in phase 1
VAP_OUT="" VAP_WARN="" VAP_APPLIED=""

# vap_try NAME LIMITS [LABELS [ANNOTATIONS]]: a server dry run of `kubectl apply` of an unbound
# pod in NS (pods.sh's pod_yaml); VAP_OUT is the admitted pod (JSON) or the error, VAP_WARN the
# warnings. Fails when the pod is refused.
vap_try() {
	local rc=0
	mkdir -p "$RUN/pods"
	pod_yaml "$1" "" "$2" "${3:-}" "$NS" "${4:-}" >"$RUN/pods/$1.yaml"
	VAP_OUT=$(kc apply --dry-run=server -o json -f "$RUN/pods/$1.yaml" 2>"$RUN/pods/$1.err") || rc=$?
	VAP_WARN=$(grep '^Warning: ' "$RUN/pods/$1.err" | sed 's/^Warning: //')
	((rc == 0)) || VAP_OUT=$(grep -v '^Warning: ' "$RUN/pods/$1.err")
	return "$rc"
}

# vap_said: the refusal of VAP_OUT, from the webhook ("denied the request: ") or a policy
# ("denied request: "), without the prefix.
vap_said() { sed -E 's/.*denied (the )?request: //' <<<"$VAP_OUT" | tr '\n' ' ' | sed 's/ *$//'; }

# vap_by: who refused VAP_OUT: "policy <name>", "webhook <name>" or the error itself.
vap_by() {
	if [[ $VAP_OUT =~ ValidatingAdmissionPolicy\ \'([^\']+)\' ]]; then
		echo "policy ${BASH_REMATCH[1]}"
	elif [[ $VAP_OUT =~ admission\ webhook\ \"([^\"]+)\" ]]; then
		echo "webhook ${BASH_REMATCH[1]}"
	else
		head -c 200 <<<"$VAP_OUT"
	fi
}

# vap_case CASE: the pod of a rule case as "LIMITS|LABELS|ANNOTATIONS".
vap_case() {
	case $1 in
	zero) echo '{podfence.io/exclusive_a: "0"}||' ;;
	big) echo '{podfence.io/shared_s: "8192001"}||' ;;
	twice) echo '{nokia.k8s.io/exclusive_a: "1", podfence.io/exclusive_a: "1"}||' ;;
	epc0) echo '{sgx.intel.com/epc: "0"}||' ;;
	epcbad) echo '{}||{epc-limit.nri.io/pod: "64MB"}' ;;
	policy) echo '{}|{podfence.io/core-sched-policy: exclusiv}|' ;;
	koord) echo '{}|{koordinator.sh/core-sched-policy: exclusiv}|' ;;
	own) echo '{podfence.io/exclusive_a: "1"}||{podfence.io/cpu-pools: "{}"}' ;;
	esac
}

# vap_try_case CASE: vap_try of the case's pod (named vap-CASE).
vap_try_case() {
	local limits labels ann
	IFS='|' read -r limits labels ann <<<"$(vap_case "$1")"
	vap_try "vap-$1" "$limits" "$labels" "$ann"
}

# expect_same_words WHAT CASE POLICY: the case's pod is refused by POLICY with the words the
# webhook used in phase 1.
expect_same_words() {
	local want=${VAP_WEBHOOK[$2]:-}
	if vap_try_case "$2"; then
		fail "$1" "admitted; want policy $3 to refuse it as the webhook did: $want"
	elif [[ $(vap_by) == "policy $3" && -n $want && $(vap_said) == "$want" ]]; then
		pass "$1" "policy $3, the webhook's words: $want"
	else
		fail "$1" "refused by $(vap_by): $(vap_said) (want policy $3: $want)"
	fi
}

# expect_vap_denied WHAT NAME POLICY ERE LIMITS [LABELS [ANNOTATIONS]]: refused by POLICY
# with a message matching ERE.
expect_vap_denied() {
	local what=$1 policy=$3 ere=$4
	if vap_try "$2" "${@:5}"; then
		fail "$what" "admitted; want policy $policy to refuse it"
	elif [[ $(vap_by) == "policy $policy" ]] && grep -qE -- "$ere" <<<"$(vap_said)"; then
		pass "$what" "policy $policy: $(vap_said)"
	else
		fail "$what" "refused by $(vap_by): $(vap_said) (want policy $policy matching /$ere/)"
	fi
}

# expect_vap_admitted WHAT NAME JQ LIMITS [LABELS [ANNOTATIONS]]: admitted; JQ (on the pod
# as admitted) says what it shows, and must not be empty or "false".
expect_vap_admitted() {
	local what=$1 jqx=$3 got
	if ! vap_try "$2" "${@:4}"; then
		fail "$what" "refused by $(vap_by): $(vap_said)"
		return 0
	fi
	got=$(jq -r "$jqx" <<<"$VAP_OUT" 2>&1)
	if [[ -n $got && $got != false ]]; then pass "$what" "admitted: $got"; else fail "$what" "admitted, but $jqx: ${got:-empty}"; fi
}

# vap_apply NAME SED...: the run's deploy/ copied to RUN/deploy-NAME with each sed expression
# applied to its kustomization.yaml, under a copy of the run's overlay; `kubectl apply -k`.
vap_apply() {
	local name=$1 e out
	shift
	rm -rf "$RUN/deploy-$name" "$RUN/overlay-$name"
	cp -r "$RUN/deploy" "$RUN/deploy-$name"
	cp -r "$OVERLAY" "$RUN/overlay-$name"
	for e in "$@"; do sed -i "$e" "$RUN/deploy-$name/kustomization.yaml"; done
	sed -i "s#^resources: \[../deploy\]#resources: [../deploy-$name]#" "$RUN/overlay-$name/kustomization.yaml"
	out=$(kc apply -k "$RUN/overlay-$name" 2>&1) || {
		fail "admission policy: kubectl apply -k ($name)" "$(tr '\n' ' ' <<<"$out")"
		return 1
	}
	VAP_APPLIED=$(grep ' created$' <<<"$out" | sed 's/\.admissionregistration\.k8s\.io//; s/ created$//' | tr '\n' ' ')
}

# wait_vap CASE WHO: waits (30 s) until the API server refuses the case's pod by WHO, as
# vap_by says it (configurations take effect a moment after they are stored); VAP_OUT is the
# last answer.
wait_vap() {
	wait_until 30 test_vap_effective "$1" "$2"
	local rc=$?
	vap_try_case "$1"
	return "$rc"
}
test_vap_effective() { ! vap_try_case "$1" && [[ $(vap_by) == "$2" ]]; }

prove_admission_policy() {
	local c pols
	# 1. The webhook alone.
	for c in zero big twice epc0 epcbad policy; do
		if vap_try_case "$c"; then
			fail "admission policy: the webhook refuses case $c" "admitted"
		else
			VAP_WEBHOOK[$c]=$(vap_said)
		fi
	done
	vap_try_case koord
	VAP_WEBHOOK[koord]=$VAP_WARN
	expect_vap_admitted "admission policy: the webhook alone admits an SGX EPC limit of 2Ti" vap-max \
		'.metadata.annotations["epc-limit.nri.io/container.app"]' '{sgx.intel.com/epc: 2Ti}'

	# 2. The component beside the webhook.
	vap_apply vap 's/^  # - admission-policy$/  - admission-policy/' || return 0
	if wait_vap policy "policy podfence-core-sched"; then
		pols=$(kc get validatingadmissionpolicybinding -l app.kubernetes.io/component=admission-policy \
			-o jsonpath='{range .items[*]}{.metadata.name}={.spec.validationActions[*]} {end}')
		pass "admission policy: deploy/ with component admission-policy applied, in force" "created ${VAP_APPLIED}; bindings: $pols"
	else
		fail "admission policy: deploy/ with component admission-policy applied, in force" "not refusing by policy after 30s: $(vap_by): $(vap_said)"
	fi
	expect_same_words "admission policy (with webhook): unreadable EPC annotation" epcbad podfence-epc
	expect_same_words "admission policy (with webhook): unknown core-sched policy" policy podfence-core-sched
	# The pod-wide key epc-limit.nri.io is in the webhooks' matchConditions too (it was missed
	# once: startsWith('epc-limit.nri.io/')): the mutating webhook refuses it before the policy.
	if vap_try vap-epc-all '{}' "" '{epc-limit.nri.io: "64MB"}'; then
		fail "admission policy (with webhook): unreadable pod-wide EPC annotation epc-limit.nri.io" "admitted"
	elif [[ $(vap_by) == "webhook "* || $(vap_by) == "policy podfence-epc" ]] && grep -q 'epc-limit.nri.io="64MB"' <<<"$(vap_said)"; then
		pass "admission policy (with webhook): unreadable pod-wide EPC annotation epc-limit.nri.io" "refused by $(vap_by): $(vap_said)"
	else
		fail "admission policy (with webhook): unreadable pod-wide EPC annotation epc-limit.nri.io" "refused by $(vap_by): $(vap_said)"
	fi
	vap_try_case koord
	if [[ -n ${VAP_WEBHOOK[koord]} ]] && grep -qxF "Validation failed for ValidatingAdmissionPolicy 'podfence-core-sched-koordinator' with binding 'podfence-core-sched-koordinator': ${VAP_WEBHOOK[koord]}" <<<"$VAP_WARN"; then
		pass "admission policy (with webhook): Koordinator's unknown policy admitted with the webhook's warning (Warn)" "$(head -n1 <<<"$VAP_WARN")"
	else
		fail "admission policy (with webhook): Koordinator's unknown policy admitted with the webhook's warning (Warn)" "warnings: $(tr '\n' '|' <<<"$VAP_WARN") (the webhook's: ${VAP_WEBHOOK[koord]})"
	fi
	expect_vap_denied "admission policy (with webhook): SGX EPC limit over maxEPC" vap-max podfence-epc-maximum \
		'^container "app": resource sgx.intel.com/epc=2Ti: over the maximum SGX EPC limit of 1Ti \(ConfigMap [a-z-]+/podfence-admission-policy, key maxEPC\)' \
		'{sgx.intel.com/epc: 2Ti}'
	expect_vap_denied "admission policy (with webhook): a pinned exclusive process in a pod without exclusive CPUs" vap-pin-bad podfence-pinning \
		'its processes name pool "exclusive_a", which no container of the pod asks for \(the pod asks for shared_s\)' \
		'{podfence.io/shared_s: "200"}' "" \
		"{podfence.io/cpus: '[{\"container\": \"app\", \"processes\": [{\"process\": \"/bin/dp\", \"pool\": \"exclusive_a\", \"cpus\": 1}]}]'}"
	expect_vap_admitted "admission policy (with webhook): the mutating webhook's podfence.io/cpu-pools passes" vap-excl \
		'.metadata.annotations["podfence.io/cpu-pools"] // false' '{podfence.io/exclusive_a: "1"}'
	expect_vap_admitted "admission policy (with webhook): the mutating webhook's EPC annotation passes" vap-epc \
		'.metadata.annotations["epc-limit.nri.io/container.app"] | select(. == "67108864") // false' '{sgx.intel.com/epc: 64Mi}'
	expect_vap_admitted "admission policy (with webhook): a pinned process in its container's exclusive pool" vap-pin \
		'.metadata.annotations["podfence.io/cpus"] // false' '{podfence.io/exclusive_a: "1"}' "" \
		"{podfence.io/cpus: '[{\"container\": \"app\", \"processes\": [{\"process\": \"/bin/dp\", \"pool\": \"exclusive_a\", \"cpus\": 1}]}]'}"

	# 3. No webhook at all, as admission-policy/no-webhook's recipe says.
	vap_apply nowebhook 's/^  # - admission-policy$/  - admission-policy\n  - admission-policy\/no-webhook/' '/^  - certs$/d' &&
		kc delete mutatingwebhookconfiguration,validatingwebhookconfiguration podfence >/dev/null 2>&1
	if wait_vap zero "policy podfence-pool-resources" && wait_vap own "policy podfence-request-annotations"; then
		prove_no_webhook
	else
		fail "admission policy (no webhook): webhook configurations deleted, no-webhook policy in force" \
			"$(vap_by): $(vap_said)"
	fi

	# 4. Restored for the checks after this one.
	kc delete validatingadmissionpolicybinding,validatingadmissionpolicy -l app.kubernetes.io/component=admission-policy >/dev/null 2>&1
	kc delete configmap -n "$PF_NS" podfence-admission-policy >/dev/null 2>&1
	if kc apply -k "$OVERLAY" >/dev/null 2>&1 && wait_vap policy "webhook pods.podfence.io"; then
		pass "admission policy: restored (webhook configurations applied again, policies deleted)" \
			"the webhook refuses again: $(vap_said); ValidatingAdmissionPolicies left: $(kc get validatingadmissionpolicy -o name | sed 's#.*/##' | tr '\n' ' ')"
	else
		fail "admission policy: restored (webhook configurations applied again, policies deleted)" "$(vap_by): $(vap_said)"
	fi
}

# prove_no_webhook: phase 3's checks.
prove_no_webhook() {
	local c
	for c in zero big twice epc0; do
		expect_same_words "admission policy (no webhook): rule case $c" "$c" "$([[ $c == epc0 ]] && echo podfence-epc || echo podfence-pool-resources)"
	done
	expect_vap_denied "admission policy (no webhook): a pod's own podfence.io/cpu-pools" vap-own-pools podfence-request-annotations \
		"^annotation podfence.io/cpu-pools=.*: podfence's own, which a pod may not set" \
		'{podfence.io/exclusive_a: "1"}' "" "{podfence.io/cpu-pools: '{\"app\":{\"exclusive_a\":1}}'}"
	expect_vap_denied "admission policy (no webhook): a pod's own podfence.io/exclusive-cpus" vap-own-cpus podfence-request-annotations \
		"^annotation podfence.io/exclusive-cpus=\"$X\": podfence's own" '{}' "" "{podfence.io/exclusive-cpus: \"$X\"}"
	expect_vap_denied "admission policy (no webhook): an EPC limit without its annotation" vap-epc-bare podfence-epc \
		'^annotation epc-limit.nri.io/container.app is missing, but container "app" has sgx.intel.com/epc=67108864' '{sgx.intel.com/epc: 64Mi}'
	expect_vap_admitted "admission policy (no webhook): an EPC limit with its annotation, as the pod wrote it" vap-epc-own \
		'.metadata.annotations["epc-limit.nri.io/container.app"] | select(. == "64Mi") // false' '{sgx.intel.com/epc: 64Mi}' "" \
		'{epc-limit.nri.io/container.app: 64Mi}'
	# A real pod: its pool from the kubelet's device, no annotation of podfence's.
	if launch_pod "admission policy (no webhook): an exclusive pod runs" vap-run "$NODE" '{podfence.io/exclusive_a: "1"}'; then
		expect_stored "admission policy (no webhook): no podfence.io/cpu-pools written" vap-run a:podfence.io/cpu-pools="<none>"
		expect_ctr "admission policy (no webhook): the exclusive pod's cpuset is its device, CPU $X" vap-run cpuset.cpus="$X" Cpus_allowed_list="$X"
		expect_env "admission policy (no webhook): env" vap-run EXCLUSIVE_CPUS="$X"
	fi
	delete_pods vap-run
}
