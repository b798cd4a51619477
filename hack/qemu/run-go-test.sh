#!/usr/bin/env bash
# Runs one Go package's tests inside a QEMU guest on the real-kernel build from kernel.sh
# (SMT 2 cores x 2 threads, CONFIG_SCHED_CORE, cgroup v2 with cpuset/cpu/memory/pids/misc).
# The test binary is PID 1's only child; the guest sets PODFENCE_IN_QEMU=1.
#
# Usage: hack/qemu/run-go-test.sh <go package> [test regexp]
#   e.g. hack/qemu/run-go-test.sh ./internal/coresched/kernel '^TestQEMU'
# Env:   PODFENCE_QEMU_TIMEOUT       seconds before QEMU is killed (default 180, 900 with a bench)
#        PODFENCE_QEMU_TEST_TIMEOUT  go test -test.timeout inside the guest (default 150s, 870s)
#        PODFENCE_QEMU_BENCH         also run the benchmarks matching this -test.bench regexp
#        PODFENCE_QEMU_BENCHTIME     their -test.benchtime (default 200x)
#        PODFENCE_QEMU_MEMORY        guest memory in MiB (default 1024)
#        PODFENCE_QEMU_CORES         guest cores, 2 threads each (default 2)
#        PODFENCE_QEMU_ACCEL         tcg or kvm (default: KVM when usable, see qemu.sh)
#        PODFENCE_QEMU_KEEP=1        keep the work directory (initramfs, console log)
#        + kernel.sh's variables
# Exit:  0 only when the guest printed "PODFENCE-QEMU-RESULT: PASS".
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,18p' "$0" >&2
  exit 2
fi
pkg=$1
run=${2:-}
bench=${PODFENCE_QEMU_BENCH:-}
limit=${PODFENCE_QEMU_TIMEOUT:-$([ -n "$bench" ] && echo 900 || echo 180)}
test_timeout=${PODFENCE_QEMU_TEST_TIMEOUT:-$([ -n "$bench" ] && echo 870s || echo 150s)}
mem=${PODFENCE_QEMU_MEMORY:-1024}

log() { printf 'run-go-test.sh: %s\n' "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
t0=$(date +%s)

kernel=$(bash "$here/kernel.sh" | tail -n1)
t_kernel=$(date +%s)

. "$here/qemu.sh"
qemu_workdir podfence-qemu

root=$work/root
mkdir -p "$root"/{dev,proc,sys,tmp}
log "building $pkg test binary and init (static)"
(
  cd "$repo"
  export CGO_ENABLED=0
  go test -c -o "$root/test" -tags qemu "$pkg"
  go build -buildvcs=false -o "$root/init" ./hack/qemu/init
  # The package's directory under /src, with the testdata of the package and of its parent
  # directories at their places (a test may read ../testdata), as the guest's working directory.
  rel=$(go list -f '{{.Dir}}' "$pkg")
  rel=${rel#"$repo"}
  rel=${rel#/}
  mkdir -p "$root/src/$rel"
  echo "/src/$rel" >"$root/workdir"
  d=${rel:-.}
  while :; do
    if [ -d "$d/testdata" ]; then mkdir -p "$root/src/$d" && cp -r "$d/testdata" "$root/src/$d/"; fi
    [ "$d" = . ] && break
    d=$(dirname "$d")
  done
)
[ -x "$root/test" ] || { log "$pkg has no tests"; exit 1; }
{
  echo -test.v
  echo -test.count=1
  echo "-test.timeout=$test_timeout"
  if [ -n "$run" ]; then echo "-test.run=$run"; fi
  if [ -n "$bench" ]; then
    echo "-test.bench=$bench"
    echo "-test.benchtime=${PODFENCE_QEMU_BENCHTIME:-200x}"
  fi
} >"$root/args"
if [ "$(id -u)" = 0 ]; then mknod -m 600 "$root/dev/console" c 5 1; fi
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 >"$work/initramfs.cpio.gz")
t_built=$(date +%s)

qemu_accel
log "booting $(basename "$(dirname "$kernel")") under QEMU ($(qemu_accel_name): $QEMU_ACCEL_WHY; $((QEMU_CORES * 2)) vCPUs = $QEMU_CORES cores x 2 threads, ${mem} MiB, limit ${limit}s)"
console=$work/console.log
rc=0
qemu_boot "$kernel" "$work/initramfs.cpio.gz" "$mem" "$limit" "$console" || rc=$?
t_done=$(date +%s)

timing="$(qemu_accel_name), kernel $((t_kernel - t0)) s, build+initramfs $((t_built - t_kernel)) s, boot+test $((t_done - t_built)) s"
result=$(qemu_result "$console")
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  log "QEMU killed after ${limit}s ($timing)"
  exit 1
fi
if [ -n "$bench" ]; then
  # The benchmarks' result lines and the tables they print, together at the end.
  tr -d '\r' <"$console" | grep -a -E '^(Benchmark|exec->cookie|  )' | grep -av -- '--- ' >&2 || true
fi
if [ "$result" = "PODFENCE-QEMU-RESULT: PASS" ]; then
  log "PASS $pkg ($timing)"
  exit 0
fi
log "FAIL $pkg: ${result:-no result line} (qemu rc=$rc; $timing)"
exit 1
