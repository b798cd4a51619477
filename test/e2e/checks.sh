# shellcheck shell=bash
# Helpers for test/e2e/run.sh: pods and containers through crictl, facts read from the real kernel
# (cgroupfs, /proc), the agent's log, and PASS/FAIL lines. Sourced after lib.sh; uses
#   RUN        the run's temp dir (JSON files, pod logs)
#   AGENT_LOG  the agent's log file
#   NS         the pods' namespace
# Every check prints one line on stdout, `PASS <what>: <facts>` or `FAIL <what>: <why>`, and
# never stops the run; the totals are in PASSED and FAILED.

PASSED=0 FAILED=0
declare -A POD=() CID=() LAUNCH_ERR=()

pass() {
	PASSED=$((PASSED + 1))
	printf 'PASS %s: %s\n' "$1" "$2"
}
fail() {
	FAILED=$((FAILED + 1))
	printf 'FAIL %s: %s\n' "$1" "$2"
}

# --- CPU lists ---------------------------------------------------------------------------

# cpulist_expand LIST: one CPU number per line ("0-2,5" -> 0 1 2 5), sorted, unique.
cpulist_expand() {
	local part lo hi
	local -a parts
	IFS=, read -ra parts <<<"$1"
	for part in "${parts[@]}"; do
		[[ -n $part ]] || continue
		lo=${part%-*} hi=${part#*-}
		seq "$lo" "$hi"
	done | sort -nu
}

# cpulist_compress: CPU numbers on stdin (sorted) -> a Linux CPU list ("0-2,5").
cpulist_compress() {
	awk 'NR == 1 {lo = hi = $1; next}
	     $1 == hi + 1 {hi = $1; next}
	     {printf "%s%s,", lo, (lo == hi ? "" : "-" hi); lo = hi = $1}
	     END {if (NR) printf "%s%s", lo, (lo == hi ? "" : "-" hi); print ""}'
}

# cpulist_norm LIST: the canonical form of a CPU list ("1,0,2" -> "0-2"); other text as is.
cpulist_norm() {
	if [[ $1 =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]]; then
		cpulist_expand "$1" | cpulist_compress
	else
		printf '%s\n' "$1"
	fi
}

# --- pods and containers ------------------------------------------------------------------

# json_str S: S as a JSON string.
json_str() {
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	printf '"%s"' "$s"
}

# json_map KEY=VALUE...: a JSON object of strings (split at the first '=').
json_map() {
	local kv out="" sep=""
	for kv in "$@"; do
		out+="$sep$(json_str "${kv%%=*}"): $(json_str "${kv#*=}")"
		sep=", "
	done
	printf '{%s}' "$out"
}

# pod_json NAME KEY=VALUE...: a pod on the host network with its own PID namespace per
# container (as kubelet does), under the harness's cgroup parent, with these annotations.
pod_json() {
	local name=$1
	shift
	cat <<EOF
{
  "metadata": {"name": "$name", "namespace": "$NS", "uid": "uid-$name", "attempt": 0},
  "labels": {"io.kubernetes.pod.name": "$name", "io.kubernetes.pod.namespace": "$NS"},
  "annotations": $(json_map "$@"),
  "log_directory": "$RUN/logs/$name",
  "linux": {
    "cgroup_parent": "$PF_CGROUP_PARENT",
    "security_context": {"namespace_options": {"network": 2, "pid": 1}}
  }
}
EOF
}

# ctr_json KEY=VALUE...: container "app", busybox `sleep 86400`, with these annotations, in
# its own PID namespace (kubelet's default: the container's process is its PID 1).
ctr_json() {
	cat <<EOF
{
  "metadata": {"name": "app"},
  "image": {"image": "$PF_BUSYBOX_IMAGE"},
  "command": ["sleep", "86400"],
  "annotations": $(json_map "$@"),
  "log_path": "app.log",
  "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}
}
EOF
}

# launch NAME [pod:KEY=VALUE | ctr:KEY=VALUE]...: runs pod NAME with container "app" through
# crictl runp/create/start, with the given pod and container annotations. Sets POD[NAME] and,
# once started, CID[NAME]; on failure returns 1 with crictl's error in LAUNCH_ERR[NAME]
# (prefixed by the step that failed: runp, create or start).
launch() {
	local name=$1 a out cid
	local -a pann=() cann=()
	shift
	for a in "$@"; do
		case $a in
		pod:*) pann+=("${a#pod:}") ;;
		ctr:*) cann+=("${a#ctr:}") ;;
		*) pf_die "launch $name: bad argument $a" ;;
		esac
	done
	pod_json "$name" ${pann[@]+"${pann[@]}"} >"$RUN/$name.pod.json"
	ctr_json ${cann[@]+"${cann[@]}"} >"$RUN/$name.ctr.json"
	unset "CID[$name]" "LAUNCH_ERR[$name]"
	if ! out=$(pf_crictl runp "$RUN/$name.pod.json" 2>&1); then
		LAUNCH_ERR[$name]="runp: $out"
		return 1
	fi
	POD[$name]=$out
	if ! cid=$(pf_crictl create "${POD[$name]}" "$RUN/$name.ctr.json" "$RUN/$name.pod.json" 2>"$RUN/$name.err"); then
		LAUNCH_ERR[$name]="create: $(cat "$RUN/$name.err")"
		return 1
	fi
	if ! out=$(pf_crictl start "$cid" 2>&1); then
		LAUNCH_ERR[$name]="start: $out"
		return 1
	fi
	CID[$name]=$cid
}

# remove NAME: removes pod NAME (and its container) through crictl.
remove() {
	if [[ -n ${POD[$1]:-} ]]; then
		pf_crictl rmp -f "${POD[$1]}" >/dev/null 2>&1 || pf_log "warning: crictl rmp ${POD[$1]} ($1) failed"
	fi
	unset "POD[$1]" "CID[$1]"
}

# update NAME CRICTL-UPDATE-FLAGS...: a resource update of container NAME through CRI
# (UpdateContainerResources, as kubelet sends). Its effect is checked from the kernel after;
# a failing update is only logged.
update() {
	[[ -n ${CID[$1]:-} ]] || return 0
	local name=$1 out
	shift
	out=$(pf_crictl update "$@" "${CID[$name]}" 2>&1) || pf_log "crictl update $* ($name) failed: $out"
}

# running_containers: how many containers the runtime runs.
running_containers() { pf_crictl ps -q --state running | grep -c . || true; }

# --- facts from the kernel ----------------------------------------------------------------

# ctr_pid NAME: the host PID of container NAME's process, as the runtime reports it.
ctr_pid() {
	[[ -n ${CID[$1]:-} ]] || return 1
	pf_crictl inspect -o go-template --template '{{.info.pid}}' "${CID[$1]}" 2>/dev/null
}

# cgroup_file PID CONTROLLER FILE: the path of FILE in PID's cgroup of CONTROLLER, read from
# /proc/PID/cgroup (cgroup v1 hierarchy, or the unified one).
cgroup_file() {
	local pid=$1 ctl=$2 file=$3 line hier ctls path
	while IFS= read -r line; do
		hier=${line%%:*} line=${line#*:}
		ctls=${line%%:*} path=${line#*:}
		if [[ ",$ctls," == *",$ctl,"* ]]; then
			echo "/sys/fs/cgroup/$ctl$path/$file"
			return 0
		fi
		if [[ $hier == 0 && -z $ctls && -f /sys/fs/cgroup$path/$file ]]; then
			echo "/sys/fs/cgroup$path/$file"
			return 0
		fi
	done <"/proc/$pid/cgroup"
	return 1
}

# fact NAME PID KEY: one fact about container NAME (process PID), or "<error: …>".
#   cpuset.cpus cpuset.mems cpu.cfs_quota_us cpu.cfs_period_us   its cgroup's files
#   Cpus_allowed_list                                            /proc/PID/status
#   NSpid          its PID inside its own PID namespace (1: it is the container's init)
#   cmdline        /proc/PID/cmdline, arguments joined by spaces
#   pid            the host PID (to prove a container did not restart)
#   state          the runtime's container state
#   spec.args      the OCI spec's process args, joined by spaces
#   mount:PATH     "ro" or "rw" if PATH is a mount point in the container, else "absent"
#   env:VAR        VAR in the container's environment (crictl exec env), "<unset>" if absent
fact() {
	local name=$1 pid=$2 key=$3 f v
	case $key in
	cpuset.cpus | cpuset.mems)
		f=$(cgroup_file "$pid" cpuset "$key") && v=$(cat "$f" 2>/dev/null) || v="<error: no cpuset cgroup>"
		;;
	cpu.cfs_quota_us | cpu.cfs_period_us)
		f=$(cgroup_file "$pid" cpu "$key") && v=$(cat "$f" 2>/dev/null) || v="<error: no cpu cgroup>"
		;;
	Cpus_allowed_list) v=$(awk '$1 == "Cpus_allowed_list:" {print $2}' "/proc/$pid/status" 2>/dev/null) ;;
	NSpid) v=$(awk '$1 == "NSpid:" {print $NF}' "/proc/$pid/status" 2>/dev/null) ;;
	cmdline) v=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) v=${v% } ;;
	pid) v=$pid ;;
	state) v=$(pf_crictl inspect -o go-template --template '{{.status.state}}' "${CID[$name]}" 2>/dev/null) ;;
	spec.args)
		# shellcheck disable=SC2016 # a Go template, not shell
		v=$(pf_crictl inspect -o go-template \
			--template '{{range $i, $a := .info.runtimeSpec.process.args}}{{if $i}} {{end}}{{$a}}{{end}}' "${CID[$name]}" 2>/dev/null)
		;;
	mount:*)
		v=$(awk -v m="${key#mount:}" '$5 == m {split($6, o, ","); print o[1]; found = 1} END {if (!found) print "absent"}' \
			"/proc/$pid/mountinfo" 2>/dev/null)
		;;
	env:*)
		v=$(pf_crictl exec "${CID[$name]}" env 2>/dev/null | awk -v k="${key#env:}" 'index($0, k "=") == 1 {print substr($0, length(k) + 2); found = 1} END {if (!found) print "<unset>"}')
		;;
	*) v="<error: unknown fact $key>" ;;
	esac
	[[ -n $v ]] || v="<error: empty>"
	printf '%s\n' "$v"
}

# show KEY VALUE: how a fact is printed (env:VAR=x as VAR=x; values with spaces quoted).
show() {
	local k=${1#env:} v=$2
	[[ $v == *" "* ]] && v="\"$v\""
	printf '%s=%s' "$k" "$v"
}

# is_cpulist_key KEY: facts compared as CPU lists.
is_cpulist_key() {
	case $1 in cpuset.cpus | cpuset.mems | Cpus_allowed_list | env:EXCLUSIVE_CPUS | env:SHARED_CPUS) return 0 ;; esac
	return 1
}

# expect_ctr WHAT NAME KEY=VALUE...: reads each fact of container NAME from the kernel (see
# fact) and compares it with VALUE; one PASS line with all facts, or one FAIL line with
# each mismatch as want/got.
expect_ctr() {
	local what=$1 name=$2 kv key want got pid
	local facts="" bad=""
	shift 2
	if [[ -z ${CID[$name]:-} ]]; then
		fail "$what" "container of pod $name is not running: ${LAUNCH_ERR[$name]:-not started}"
		return 0
	fi
	if ! pid=$(ctr_pid "$name") || [[ ! $pid =~ ^[1-9][0-9]*$ || ! -d /proc/$pid ]]; then
		fail "$what" "no live process for container ${CID[$name]:0:13} (pid '${pid:-}')"
		return 0
	fi
	for kv in "$@"; do
		key=${kv%%=*} want=${kv#*=}
		got=$(fact "$name" "$pid" "$key")
		if is_cpulist_key "$key"; then
			want=$(cpulist_norm "$want") got=$(cpulist_norm "$got")
		fi
		facts+="${facts:+ }$(show "$key" "$got")"
		[[ $got == "$want" ]] || bad+="${bad:+; }$(show "$key" "$got") (want $(show "$key" "$want"))"
	done
	if [[ -z $bad ]]; then
		pass "$what" "$facts"
	else
		fail "$what" "$bad [container ${CID[$name]:0:13} pid $pid]"
	fi
}

# refusal_reason TEXT: the runtime's error without the gRPC wrapping (after the last "desc = ").
refusal_reason() {
	local t=${1##*desc = }
	t=${t%\"}
	printf '%s\n' "${t//\\\"/\"}"
}

# expect_refused WHAT NAME ERE LAUNCH-ARGS...: launching pod NAME must fail at `crictl create`
# with an error matching ERE (grep -E). The pod is removed afterwards either way.
expect_refused() {
	local what=$1 name=$2 ere=$3 err
	shift 3
	if launch "$name" "$@"; then
		fail "$what" "container was created and started (${CID[$name]:0:13}); want create refused matching /$ere/"
	else
		err=${LAUNCH_ERR[$name]}
		if [[ $err != create:* ]]; then
			fail "$what" "want crictl create to fail, but $err"
		elif grep -qE -- "$ere" <<<"$err"; then
			pass "$what" "crictl create failed: $(refusal_reason "$err")"
		else
			fail "$what" "create failed without /$ere/: $err"
		fi
	fi
	remove "$name"
}

# --- the agent's log ----------------------------------------------------------------------

# log_lines: how many lines the agent's log has (an offset for the checks below).
log_lines() { if [[ -f $AGENT_LOG ]]; then wc -l <"$AGENT_LOG"; else echo 0; fi; }

# log_since OFFSET: the agent's log after line OFFSET.
log_since() { tail -n "+$(($1 + 1))" "$AGENT_LOG" 2>/dev/null || true; }

# wait_log OFFSET ERE [SECONDS]: waits until a log line after OFFSET matches ERE; prints it.
wait_log() {
	local off=$1 ere=$2 n=$((${3:-15} * 10)) line
	for ((i = 0; i < n; i++)); do
		line=$(log_since "$off" | grep -E -- "$ere" | head -n1)
		if [[ -n $line ]]; then
			printf '%s\n' "$line"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# log_msg LINE: a slog line without its time and level.
log_msg() { sed -E 's/^time=[^ ]+ //; s/^level=INFO //' <<<"$1"; }

# expect_log WHAT OFFSET ERE [SECONDS]: a log line after OFFSET must match ERE (waits for it).
expect_log() {
	local line
	if line=$(wait_log "$2" "$3" "${4:-15}"); then
		pass "$1" "agent log: $(log_msg "$line")"
	else
		fail "$1" "no agent log line matching /$3/ within ${4:-15}s; log since: $(log_since "$2" | tail -n 5 | tr '\n' '|')"
	fi
}
