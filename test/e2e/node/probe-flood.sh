# shellcheck shell=bash
# Proof: a connection flood on the agent's metrics address (the node's IP, reachable by anyone
# on the network) does not make the kubelet restart the agent. test/e2e/node/flood holds 64
# silent TCP connections and 32 kept-alive TLS ones, reopening each the server closes, for
# FLOOD_SECONDS (more than the liveness probe's period x failureThreshold of deploy/'s pod,
# whose probes run with the kubelet's settings: timeout 1 s). Meanwhile: the pod stays Ready,
# its container is not restarted, no Unhealthy event is posted, and a scrape from another
# source address (127.0.0.2) is answered. The probes go to the agent's health listener on
# 127.0.0.1:9465 (--health-address); the metrics address bounds connections per source.
# Sourced by run.sh after metrics-auth.sh; uses RUN, PF_NS, AGENT_POD, METRICS_HOST,
# METRICS_PORT and METRICS_READER_TOKEN.

FLOOD_SECONDS=${PODFENCE_E2E_FLOOD_SECONDS:-75}

# agent_restarts: the agent container's restart count and start time.
agent_restarts() {
	kc get pod -n "$PF_NS" "$AGENT_POD" -o jsonpath='{.status.containerStatuses[?(@.name=="agent")].restartCount} {.status.containerStatuses[?(@.name=="agent")].state.running.startedAt}'
}

agent_ready() {
	kc get pod -n "$PF_NS" "$AGENT_POD" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
}

prove_probes_under_flood() {
	local before after flood_pid ready notready=0 scrapes=0 scraped=0 got probes events since
	if ! go build -o "$RUN/flood" "$PF_E2E_DIR/node/flood" 2>"$RUN/flood.build"; then
		fail "probes under a flood" "build test/e2e/node/flood: $(tail -n 3 "$RUN/flood.build" | tr '\n' ' ')"
		return 0
	fi
	probes=$(kc get pod -n "$PF_NS" "$AGENT_POD" -o jsonpath='{.spec.containers[?(@.name=="agent")].livenessProbe}')
	before=$(agent_restarts)
	since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	"$RUN/flood" -addr "$METRICS_HOST:$METRICS_PORT" -tls -for "${FLOOD_SECONDS}s" >"$RUN/flood.out" 2>&1 &
	flood_pid=$!
	local end=$((SECONDS + FLOOD_SECONDS))
	while ((SECONDS < end)); do
		sleep 5
		ready=$(agent_ready)
		[[ $ready == True ]] || ((notready++))
		((scrapes++))
		got=$(curl -sk --interface 127.0.0.2 -m 10 -o /dev/null -w '%{http_code}' \
			-H "Authorization: Bearer $METRICS_READER_TOKEN" "https://$METRICS_HOST:$METRICS_PORT/metrics" || true)
		[[ $got == 200 ]] && ((scraped++))
	done
	wait "$flood_pid" || true
	after=$(agent_restarts)
	events=$(kc get events -n "$PF_NS" --field-selector "involvedObject.name=$AGENT_POD,reason=Unhealthy" \
		-o json | jq -r --arg since "$since" '[.items[] | select((.lastTimestamp // .eventTime) >= $since) | .message] | unique | join("; ")')
	local facts="$(cat "$RUN/flood.out"); liveness probe $probes; restarts/start before: $before, after: $after; Ready false in $notready of $scrapes checks; scrapes from 127.0.0.2 answered 200: $scraped of $scrapes"
	if [[ $before == "$after" ]] && ((notready == 0)) && [[ -z $events ]] && ((scraped == scrapes)) && grep -q 'connections opened' "$RUN/flood.out"; then
		pass "probes under a flood: the agent stays Ready and is not restarted" "$facts"
	else
		fail "probes under a flood: the agent stays Ready and is not restarted" "$facts; Unhealthy events: ${events:-none}"
	fi
}
