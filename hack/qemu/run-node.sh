#!/usr/bin/env bash
# `make qemu-node`: a container runtime and the podfence agent on the real-kernel build of
# kernel.sh (SMT 2 cores x 2 threads, SCHED_CORE, cgroup v2 with misc), in a QEMU guest.
# The guest runs containerd with NRI, runc, crictl and the agent (static), runs pods through
# CRI and prints one PASS/FAIL line per check of facts read from its cgroup v2 files and
# /proc (hack/qemu/node, run by hack/qemu/init as /test).
#
# Usage: hack/qemu/run-node.sh
# Env:   PODFENCE_QEMU_NODE_TIMEOUT  seconds before QEMU is killed (default 600)
#        PODFENCE_QEMU_NODE_MEMORY   guest memory in MiB (default 2048)
#        PODFENCE_QEMU_KEEP=1        keep the work directory (initramfs, console log)
#        PODFENCE_QEMU_NODE_PODFENCE a static podfence binary to run instead of building
#                                    ./cmd/podfence (e.g. a release, or while the tree is mid-edit)
#        + kernel.sh's variables, and test/e2e/lib.sh's PODFENCE_E2E_CACHE (the tools and
#          images of test/e2e, built there once and cached)
# Exit:  0 only when the guest printed at least one PASS line, no FAIL line, and
#        "PODFENCE-QEMU-RESULT: PASS".
set -euo pipefail

if [ $# -ne 0 ]; then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
[ "$(id -u)" = 0 ] || { echo "run-node.sh needs root (test/e2e/tools.sh installs and builds as root)" >&2; exit 1; }
limit=${PODFENCE_QEMU_NODE_TIMEOUT:-600}
mem=${PODFENCE_QEMU_NODE_MEMORY:-2048}

log() { printf 'run-node.sh: %s\n' "$*" >&2; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
# shellcheck source=../../test/e2e/lib.sh
. "$repo/test/e2e/lib.sh" # PF_E2E_DIR, PF_BIN, PF_IMAGES
# shellcheck source=qemu.sh
. "$here/qemu.sh"
t0=$(date +%s)

# containerd, ctr, the shim, runc and crictl as test/e2e builds them, and its two images.
bash "$PF_E2E_DIR/tools.sh" >&2
bash "$PF_E2E_DIR/images.sh" build >&2
t_tools=$(date +%s)
kernel=$(bash "$here/kernel.sh" | tail -n1)
t_kernel=$(date +%s)

qemu_workdir podfence-qemu-node

root=$work/root
bin=$root/usr/local/bin
mkdir -p "$root"/{dev,proc,sys,tmp,etc,images} "$bin"
log "building podfence, init and the guest program (static)"
(
  cd "$repo"
  export CGO_ENABLED=0
  if [ -n "${PODFENCE_QEMU_NODE_PODFENCE:-}" ]; then
    cp "$PODFENCE_QEMU_NODE_PODFENCE" "$bin/podfence"
  else
    go build -tags grpcnotrace -buildvcs=false -o "$bin/podfence" ./cmd/podfence
  fi
  go build -buildvcs=false -o "$root/init" ./hack/qemu/init
  go build -buildvcs=false -o "$root/test" ./hack/qemu/node
)
tools=(containerd containerd-shim-runc-v2 ctr runc crictl)
for t in "${tools[@]}"; do cp "$PF_BIN/$t" "$bin/"; done
# Their shared libraries (glibc, libseccomp) at the paths the dynamic loader looks in.
for t in "${tools[@]}"; do ldd "$PF_BIN/$t"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
  while read -r lib; do cp -L --parents "$lib" "$root/"; done
cp "$PF_IMAGES/busybox.tar" "$PF_IMAGES/pause.tar" "$root/images/"
mknod -m 600 "$root/dev/console" c 5 1
# Uncompressed: the kernel unpacks it faster under TCG than it inflates a gzip.
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet >"$work/initramfs.cpio")
t_built=$(date +%s)
log "initramfs $(du -m "$work/initramfs.cpio" | cut -f1) MiB"

qemu_accel
log "booting $(basename "$(dirname "$kernel")") under QEMU ($(qemu_accel_name): $QEMU_ACCEL_WHY; $((QEMU_CORES * 2)) vCPUs = $QEMU_CORES cores x 2 threads, ${mem} MiB, limit ${limit}s)"
console=$work/console.log
rc=0
qemu_boot "$kernel" "$work/initramfs.cpio" "$mem" "$limit" "$console" || rc=$?
t_done=$(date +%s)

timing="$(qemu_accel_name), tools+images $((t_tools - t0)) s, kernel $((t_kernel - t_tools)) s, build+initramfs $((t_built - t_kernel)) s, boot+run $((t_done - t_built)) s"
result=$(qemu_result "$console")
passed=$(tr -d '\r' <"$console" | grep -ac '^PASS ' || true)
failed=$(tr -d '\r' <"$console" | grep -ac '^FAIL ' || true)
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  log "QEMU killed after ${limit}s ($passed passed, $failed failed so far; $timing)"
  exit 1
fi
if [ "$result" = "PODFENCE-QEMU-RESULT: PASS" ] && [ "$failed" = 0 ] && [ "$passed" -gt 0 ]; then
  log "PASS: $passed checks ($timing)"
  exit 0
fi
log "FAIL: $passed passed, $failed failed, ${result:-no result line} (qemu rc=$rc; $timing)"
exit 1
