# shellcheck shell=bash
# Booting the guest, shared by run-go-test.sh and run-node.sh. Source it; it defines:
#
# qemu_boot KERNEL INITRAMFS MEMORY_MB LIMIT_S CONSOLE_LOG
#   Boots the guest (TCG, q35, 4 vCPUs = 1 socket x 2 cores x 2 threads, no NIC) under
#   timeout(1), streams its console to stdout (without \r and the firmware's terminal
#   resets) and returns QEMU's exit status: 124 or 137 when killed at LIMIT_S. QEMU_PID is
#   set while it runs, for the caller's EXIT trap (qemu_stop). vendor=GenuineIntel is what
#   makes the guest see SMT siblings; KVM hangs on this machine.
# qemu_stop
#   Stops a running QEMU (timeout(1) passes the signal on) and waits for it.
# qemu_result CONSOLE_LOG
#   Prints the guest's last "PODFENCE-QEMU-RESULT: ..." line (hack/qemu/init), or nothing.

QEMU_PID=

qemu_boot() {
  local kernel=$1 initramfs=$2 mem=$3 limit=$4 console=$5 spid rc=0
  : >"$console"
  timeout -k 5 "$limit" qemu-system-x86_64 \
    -machine q35 -accel tcg -cpu qemu64,vendor=GenuineIntel -m "$mem" \
    -smp 4,sockets=1,cores=2,threads=2 \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 panic=-1 quiet" \
    -nic none -nographic -no-reboot </dev/null >"$console" 2>&1 &
  QEMU_PID=$!
  # In the background, so that a signal to the caller is handled at once (wait is interruptible).
  tail -n +1 -f --pid="$QEMU_PID" "$console" |
    sed -u -e 's/\r//g' -e 's/\x1bc/\n/g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' &
  spid=$!
  wait "$QEMU_PID" || rc=$?
  QEMU_PID=
  wait "$spid" || true
  return "$rc"
}

qemu_stop() {
  if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
    kill "$QEMU_PID" 2>/dev/null || true
    wait "$QEMU_PID" 2>/dev/null || true
  fi
  QEMU_PID=
}

qemu_result() {
  tr -d '\r' <"$1" | grep -a '^PODFENCE-QEMU-RESULT:' | tail -n1 || true
}

# qemu_workdir PREFIX: a new work dir in $work, removed on exit (kept with
# PODFENCE_QEMU_KEEP=1) after the guest is stopped; ^C exits 130.
qemu_workdir() {
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap qemu_cleanup EXIT
  trap 'exit 130' INT TERM
}

qemu_cleanup() {
  qemu_stop
  if [ "${PODFENCE_QEMU_KEEP:-}" = 1 ]; then
    log "kept $work"
  else
    rm -rf "$work"
  fi
}
