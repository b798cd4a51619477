// Package kernel is podfence's edge to Linux core scheduling: per-task cookies set with
// prctl(PR_SCHED_CORE, cmd, pid, type, uaddr), see
// https://docs.kernel.org/admin-guide/hw-vuln/core-scheduling.html.
//
// Tasks with different cookies never run on sibling SMT threads of one core at the same time;
// tasks with equal cookies may. Cookies are inherited on fork, clone and exec. Cookie values
// are opaque: compare them for equality only; 0 means "no cookie".
//
// Every call that sets a cookie from the caller's own cookie runs on a locked OS thread, so no
// thread of the calling process keeps a borrowed cookie: Share on one long-lived thread that
// puts its own cookie back after each call (or ends), Clear and Probe on threads the Go
// runtime then discards.
package kernel

import (
	"errors"
	"fmt"
)

// Cookie is a core-scheduling cookie as read back by GET: opaque, equality only. Zero means no
// cookie, but note that GET also reads 0 for a few seconds after boot (the kernel hashes cookies
// with a key set once its RNG is ready).
type Cookie uint64

// Scope is the set of tasks a cookie operation applies to: the kernel's pid type.
type Scope int

const (
	// Thread is one task (PIDTYPE_PID).
	Thread Scope = 0
	// Process is every thread of the thread group of the pid (PIDTYPE_TGID).
	Process Scope = 1
	// ProcessGroup is every thread of every process in the pid's process group (PIDTYPE_PGID).
	ProcessGroup Scope = 2
)

func (s Scope) String() string {
	switch s {
	case Thread:
		return "thread"
	case Process:
		return "process"
	case ProcessGroup:
		return "process-group"
	}
	return fmt.Sprintf("scope(%d)", int(s))
}

func (s Scope) valid() bool { return s >= Thread && s <= ProcessGroup }

// Kernel is the core-scheduling surface the agent needs. Implementations: Prctl (the real
// syscall) and fakes in the consumer's tests. pid is a task id as seen by the caller (a thread
// id for Thread scope, any thread of the process for Process scope).
type Kernel interface {
	// Create gives the tasks of pid at scope one new cookie, shared by nothing else.
	Create(pid int, scope Scope) error
	// Share gives the tasks of pid at scope the cookie of thread from (SHARE_FROM then
	// SHARE_TO on a throw-away thread). A from without a cookie clears theirs.
	Share(from, pid int, scope Scope) error
	// Clear sets the cookie of the tasks of pid at scope to 0 (no cookie).
	Clear(pid int, scope Scope) error
	// Get reads the cookie of thread pid.
	Get(pid int) (Cookie, error)
}

// Errors mapped from the kernel's errno, for callers to branch on with errors.Is. The errno
// itself stays in the chain as well (errors.Is(err, unix.EPERM) holds too).
var (
	// ErrNoSchedCore: EINVAL, the kernel is built without CONFIG_SCHED_CORE.
	ErrNoSchedCore = errors.New("kernel without core scheduling (CONFIG_SCHED_CORE)")
	// ErrNoSMT: ENODEV, core scheduling is built in but SMT is absent or off.
	ErrNoSMT = errors.New("no SMT: core scheduling needs sibling hyperthreads")
	// ErrNoPermission: EPERM, the caller may not ptrace (PTRACE_MODE_READ) the task.
	ErrNoPermission = errors.New("no permission: needs ptrace access to the task (CAP_SYS_PTRACE)")
	// ErrNoTask: ESRCH, no task with that pid (it exited).
	ErrNoTask = errors.New("no such task")
	// ErrCallerCookie: the throw-away thread already had a cookie, so Clear would copy it; an
	// earlier caller left a cookie on the process.
	ErrCallerCookie = errors.New("calling thread has a core-scheduling cookie")
	// ErrThreadTainted: ShareHere could not give the calling thread its own cookie back; the
	// caller must let that thread end (return from its goroutine while locked).
	ErrThreadTainted = errors.New("calling thread kept another cookie")
)
