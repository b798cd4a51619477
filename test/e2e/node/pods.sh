# shellcheck shell=bash
# Pods through kubectl, for run.sh: the pod manifest, apply, wait until running, delete.
# Sourced after cluster.sh (kc) and ../checks.sh (CID, LAUNCH_ERR, fail); uses RUN and NS.

# pod_yaml NAME NODE LIMITS [LABELS [NAMESPACE [ANNOTATIONS]]]: a busybox `sleep` pod on the
# host network, with no API token; LIMITS, LABELS and ANNOTATIONS are YAML flow maps; NODE
# empty: for scheduler POD_SCHEDULER, by default one that nobody runs (never bound).
pod_yaml() {
	local where="nodeName: $2"
	[[ -n $2 ]] || where="schedulerName: ${POD_SCHEDULER:-pf-e2e-unscheduled}"
	cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: ${5:-$NS}
  labels: ${4:-{\}}
  annotations: ${6:-{\}}
spec:
  $where
  hostNetwork: true
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 2
  containers:
    - name: app
      image: $PF_BUSYBOX_IMAGE
      imagePullPolicy: Never
      command: [/bin/sleep, "86400"]
      resources:
        limits: ${3:-{\}}
EOF
}

# apply NAME NODE LIMITS [LABELS [NAMESPACE [ANNOTATIONS]]]: kubectl apply of pod_yaml;
# APPLY_OUT holds kubectl's output.
APPLY_OUT=""
apply() {
	mkdir -p "$RUN/pods"
	pod_yaml "$@" >"$RUN/pods/$1.yaml"
	APPLY_OUT=$(kc apply -f "$RUN/pods/$1.yaml" 2>&1)
}

# pod_get NAME JSONPATH
pod_get() { kc get pod -n "$NS" "$1" -o jsonpath="$2" 2>/dev/null; }

# wait_running NAME: waits (60 s) for container app to run; sets CID[NAME] for checks.sh.
wait_running() {
	local cid
	unset "CID[$1]"
	if ! wait_until 60 test_running "$1"; then
		LAUNCH_ERR[$1]="not running after 60s: phase $(pod_get "$1" '{.status.phase}') $(pod_get "$1" '{.status.reason} {.status.message} {.status.containerStatuses[0].state}')"
		return 1
	fi
	cid=$(pod_get "$1" '{.status.containerStatuses[0].containerID}')
	# shellcheck disable=SC2034 # CID is checks.sh's
	CID[$1]=${cid#containerd://}
}
test_running() { [[ -n $(pod_get "$1" '{.status.containerStatuses[0].state.running.startedAt}') ]]; }

# launch_pod WHAT NAME NODE LIMITS [LABELS]: apply + wait_running; a FAIL line if either fails.
launch_pod() {
	local what=$1
	shift
	if ! apply "$@"; then
		fail "$what" "kubectl apply failed: $APPLY_OUT"
		return 1
	fi
	wait_running "$1" || {
		fail "$what" "${LAUNCH_ERR[$1]}"
		return 1
	}
}

# delete_pods NAME...: kubectl delete, waiting until the kubelet has removed them.
delete_pods() {
	kc delete pod -n "$NS" "$@" --wait=true --timeout=90s >/dev/null 2>&1 || pf_log "warning: kubectl delete pod $* did not finish"
	local n
	for n in "$@"; do unset "CID[$n]"; done
}
