# shellcheck shell=bash
# Booting the guest, shared by run-go-test.sh and run-node.sh. Source it; it defines:
#
# qemu_accel
#   Picks the accelerator into QEMU_ACCEL (kvm or tcg) and says why in QEMU_ACCEL_WHY;
#   PODFENCE_QEMU_ACCEL=tcg|kvm forces one. Unset (auto): KVM when /dev/kvm is usable, i.e.
#   readable and writable and backed by hardware virtualization (a vmx or svm CPU flag), else
#   TCG. A /dev/kvm without either flag is a software hypervisor such as kvm_pvm, which runs
#   only PVM-enabled guest kernels: ours hangs there in the boot ROM.
# qemu_boot KERNEL INITRAMFS MEMORY_MB LIMIT_S CONSOLE_LOG
#   Boots the guest (q35, 1 socket x QEMU_CORES cores x 2 threads, no NIC) under timeout(1)
#   with QEMU_ACCEL (qemu_accel first if unset), streams its console to stdout (without \r
#   and the firmware's terminal resets) and returns QEMU's exit status: 124 or 137 when
#   killed at LIMIT_S, 125 when a KVM guest printed nothing of its init (QEMU failed, or
#   was stopped after PODFENCE_QEMU_KVM_BOOT seconds, default 30); auto then boots again
#   with TCG, a forced kvm fails. QEMU_PID is set while it runs, for the caller's EXIT trap (qemu_stop).
#   TCG: -cpu qemu64,vendor=GenuineIntel (the Intel vendor is what makes the guest see SMT
#   siblings); KVM: -cpu host, the host's CPU model with the same -smp topology.
# qemu_stop
#   Stops a running QEMU (timeout(1) passes the signal on) and waits for it.
# qemu_result CONSOLE_LOG
#   Prints the guest's last "PODFENCE-QEMU-RESULT: ..." line (hack/qemu/init), or nothing.

QEMU_PID=

qemu_accel() {
  local why
  case ${PODFENCE_QEMU_ACCEL:-auto} in
  tcg) QEMU_ACCEL=tcg QEMU_ACCEL_WHY="forced by PODFENCE_QEMU_ACCEL=tcg" ;;
  kvm) QEMU_ACCEL=kvm QEMU_ACCEL_WHY="forced by PODFENCE_QEMU_ACCEL=kvm" ;;
  auto)
    if why=$(qemu_kvm_unusable); then
      QEMU_ACCEL=tcg QEMU_ACCEL_WHY="KVM unusable: $why"
    else
      QEMU_ACCEL=kvm QEMU_ACCEL_WHY="/dev/kvm with hardware virtualization"
    fi
    ;;
  *)
    printf 'qemu.sh: PODFENCE_QEMU_ACCEL=%s: want tcg, kvm or unset (auto)\n' "$PODFENCE_QEMU_ACCEL" >&2
    return 2
    ;;
  esac
}

# qemu_kvm_unusable prints why KVM cannot run our guest and succeeds, or fails when it can.
qemu_kvm_unusable() {
  if [ ! -c /dev/kvm ]; then
    echo "no /dev/kvm"
  elif [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    echo "/dev/kvm is not readable and writable by $(id -un)"
  elif ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
    if [ -d /sys/module/kvm_pvm ]; then
      echo "/dev/kvm is kvm_pvm (no vmx/svm): it runs only PVM-enabled guest kernels"
    else
      echo "/dev/kvm without hardware virtualization (no vmx/svm CPU flag)"
    fi
  else
    return 1
  fi
}

# qemu_accel_name: "KVM" or "TCG", for log lines.
qemu_accel_name() { if [ "$QEMU_ACCEL" = kvm ]; then echo KVM; else echo TCG; fi; }

# QEMU_CORES: the guest's cores, 2 threads each (PODFENCE_QEMU_CORES, default 2).
QEMU_CORES=${PODFENCE_QEMU_CORES:-2}

qemu_boot() {
  local kernel=$1 initramfs=$2 mem=$3 limit=$4 console=$5 spid wpid rc=0 cpu
  case $QEMU_CORES in
  [1-9] | [1-9][0-9]) ;;
  *)
    printf 'qemu.sh: PODFENCE_QEMU_CORES=%s: want a number of cores from 1 to 99\n' "$QEMU_CORES" >&2
    return 2
    ;;
  esac
  [ -n "${QEMU_ACCEL:-}" ] || qemu_accel || return
  cpu=qemu64,vendor=GenuineIntel
  if [ "$QEMU_ACCEL" = kvm ]; then cpu=host; fi
  : >"$console"
  timeout -k 5 "$limit" qemu-system-x86_64 \
    -machine q35 -accel "$QEMU_ACCEL" -cpu "$cpu" -m "$mem" \
    -smp "$((QEMU_CORES * 2))",sockets=1,cores="$QEMU_CORES",threads=2 \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 panic=-1 quiet" \
    -nic none -nographic -no-reboot </dev/null >"$console" 2>&1 &
  QEMU_PID=$!
  # In the background, so that a signal to the caller is handled at once (wait is interruptible).
  tail -n +1 -f --pid="$QEMU_PID" "$console" |
    sed -u -e 's/\r//g' -e 's/\x1bc/\n/g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' &
  spid=$!
  wpid=
  if [ "$QEMU_ACCEL" = kvm ]; then
    qemu_boot_watchdog "$QEMU_PID" "$console" "${PODFENCE_QEMU_KVM_BOOT:-30}" &
    wpid=$!
  fi
  wait "$QEMU_PID" || rc=$?
  QEMU_PID=
  wait "$spid" || true
  if [ -n "$wpid" ]; then kill "$wpid" 2>/dev/null || true; wait "$wpid" 2>/dev/null || true; fi
  if [ "$QEMU_ACCEL" = kvm ] && ! grep -aq 'podfence-init:' "$console"; then
    printf 'qemu.sh: the KVM guest printed nothing of its init (QEMU rc=%s, limit %s s)\n' "$rc" "${PODFENCE_QEMU_KVM_BOOT:-30}" >&2
    if [ "${PODFENCE_QEMU_ACCEL:-auto}" = auto ]; then
      QEMU_ACCEL=tcg QEMU_ACCEL_WHY="the KVM guest did not boot"
      printf 'qemu.sh: booting again under TCG\n' >&2
      qemu_boot "$@"
      return
    fi
    return 125
  fi
  return "$rc"
}

# qemu_boot_watchdog PID CONSOLE SECONDS: stops QEMU PID unless the guest's init has written
# to CONSOLE within SECONDS.
qemu_boot_watchdog() {
  local pid=$1 console=$2 n=$(($3 * 5))
  while [ "$n" -gt 0 ]; do
    if grep -aq 'podfence-init:' "$console" 2>/dev/null; then return 0; fi
    sleep 0.2
    n=$((n - 1))
  done
  kill "$pid" 2>/dev/null || true
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
