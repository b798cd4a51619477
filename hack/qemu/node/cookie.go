//go:build linux

package main

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cookie reads a thread's core-scheduling cookie with prctl(PR_SCHED_CORE,
// PR_SCHED_CORE_GET, tid, PIDTYPE_PID): an opaque value, 0 for none.
func cookie(tid int) (uint64, error) {
	var v uint64
	const pidtypePID = 0
	if err := unix.PrctlArg5Ptr(unix.PR_SCHED_CORE, unix.PR_SCHED_CORE_GET, uintptr(tid), pidtypePID,
		unsafe.Pointer(&v)); err != nil {
		return 0, fmt.Errorf("PR_SCHED_CORE_GET thread %d: %w", tid, err)
	}
	return v, nil
}
