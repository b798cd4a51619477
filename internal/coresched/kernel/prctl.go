package kernel

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Prctl is the real Kernel: prctl(2) with PR_SCHED_CORE. The zero value is ready to use. The
// caller needs ptrace access (PTRACE_MODE_READ_REALCREDS) to every task it names, and must never
// name its own process: Share and Clear would then give it a cookie.
type Prctl struct{}

var _ Kernel = Prctl{}

// cmd is a PR_SCHED_CORE command.
type cmd uintptr

const (
	cmdGet       cmd = unix.PR_SCHED_CORE_GET
	cmdCreate    cmd = unix.PR_SCHED_CORE_CREATE
	cmdShareTo   cmd = unix.PR_SCHED_CORE_SHARE_TO
	cmdShareFrom cmd = unix.PR_SCHED_CORE_SHARE_FROM
)

func (c cmd) String() string {
	switch c {
	case cmdGet:
		return "GET"
	case cmdCreate:
		return "CREATE"
	case cmdShareTo:
		return "SHARE_TO"
	case cmdShareFrom:
		return "SHARE_FROM"
	}
	return fmt.Sprintf("cmd(%d)", uintptr(c))
}

// Create gives the tasks of pid at scope a new cookie. It leaves the caller's threads alone, so
// it needs no throw-away thread.
func (Prctl) Create(pid int, scope Scope) error {
	if err := checkArgs(cmdCreate, pid, scope); err != nil {
		return err
	}
	return prctl(cmdCreate, pid, scope)
}

// Share gives the tasks of pid at scope the cookie of thread from: SHARE_FROM(from) then
// SHARE_TO(pid) on the sharer thread, which then puts its own cookie back (sharer.go).
func (Prctl) Share(from, pid int, scope Scope) error {
	if err := checkArgs(cmdShareFrom, from, Thread); err != nil {
		return err
	}
	if err := checkArgs(cmdShareTo, pid, scope); err != nil {
		return err
	}
	return shareOnSharer(from, pid, scope)
}

// Clear sets the cookie of the tasks of pid at scope to 0: SHARE_TO from a thread without a
// cookie. It fails with ErrCallerCookie when that thread turns out to have one.
func (Prctl) Clear(pid int, scope Scope) error {
	if err := checkArgs(cmdShareTo, pid, scope); err != nil {
		return err
	}
	return onThrowawayThread(func(tid int) error {
		own, err := get(tid)
		if err != nil {
			return err
		}
		if own != 0 {
			return fmt.Errorf("core scheduling clear pid %d: thread %d has cookie %#x: %w",
				pid, tid, uint64(own), ErrCallerCookie)
		}
		return prctl(cmdShareTo, pid, scope)
	})
}

// Get reads the cookie of thread pid.
func (Prctl) Get(pid int) (Cookie, error) {
	if err := checkArgs(cmdGet, pid, Thread); err != nil {
		return 0, err
	}
	return get(pid)
}

// Support is what Probe found out about core scheduling on this machine.
type Support struct {
	// Err is nil when this kernel can give tasks cookies; otherwise it wraps ErrNoSchedCore,
	// ErrNoSMT or the errno that stopped the probe.
	Err error
	// Readable: GET read the probe's own cookie back as non-zero. False for a few seconds
	// after boot, until the kernel's hash key is set; GET-based recovery must wait for it.
	Readable bool
	// CapSysPtrace: the caller holds CAP_SYS_PTRACE, so EPERM is unlikely for other users'
	// tasks. The probe itself cannot see EPERM: it only touches its own thread.
	CapSysPtrace bool
}

// Available reports whether cookies can be created.
func (s Support) Available() bool { return s.Err == nil }

func (s Support) String() string {
	if s.Err != nil {
		return "core scheduling unavailable: " + s.Err.Error()
	}
	return fmt.Sprintf("core scheduling available (cookies readable: %t, CAP_SYS_PTRACE: %t)",
		s.Readable, s.CapSysPtrace)
}

// Probe finds out whether core scheduling works here without touching any other task: a
// throw-away thread creates a cookie for itself, reads it back and exits.
func (Prctl) Probe() Support {
	var s Support
	s.Err = onThrowawayThread(func(tid int) error {
		if err := prctl(cmdCreate, tid, Thread); err != nil {
			return err
		}
		c, err := get(tid)
		s.Readable = c != 0
		return err
	})
	s.CapSysPtrace = hasCap(unix.CAP_SYS_PTRACE)
	return s
}

func checkArgs(c cmd, pid int, scope Scope) error {
	if pid <= 0 {
		return fmt.Errorf("core scheduling %s: pid %d: want a positive task id", c, pid)
	}
	if !scope.valid() {
		return fmt.Errorf("core scheduling %s pid %d: invalid %s", c, pid, scope)
	}
	return nil
}

func prctl(c cmd, pid int, scope Scope) error {
	err := unix.Prctl(unix.PR_SCHED_CORE, uintptr(c), uintptr(pid), uintptr(scope), 0)
	return wrap(c, pid, scope, err)
}

func get(pid int) (Cookie, error) {
	var v uint64
	err := unix.PrctlArg5Ptr(unix.PR_SCHED_CORE, uintptr(cmdGet), uintptr(pid), uintptr(Thread),
		unsafe.Pointer(&v))
	return Cookie(v), wrap(cmdGet, pid, Thread, err)
}

// wrap adds the operation and the cause to a prctl error; both the sentinel and the errno stay
// matchable with errors.Is.
func wrap(c cmd, pid int, scope Scope, err error) error {
	if err == nil {
		return nil
	}
	var cause error
	switch {
	case errors.Is(err, unix.EINVAL):
		cause = ErrNoSchedCore
	case errors.Is(err, unix.ENODEV):
		cause = ErrNoSMT
	case errors.Is(err, unix.EPERM):
		cause = ErrNoPermission
	case errors.Is(err, unix.ESRCH):
		cause = ErrNoTask
	}
	if cause == nil {
		return fmt.Errorf("core scheduling %s pid %d %s: %w", c, pid, scope, err)
	}
	return fmt.Errorf("core scheduling %s pid %d %s: %w: %w", c, pid, scope, cause, err)
}

// onThrowawayThread runs fn(tid) on an OS thread that ends afterwards, so a cookie that fn
// leaves on its own thread dies with it. It returns once that thread is gone (or after 1 s).
func onThrowawayThread(fn func(tid int) error) error {
	type result struct {
		tid int // the thread to wait for; 0 when none was used up
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		tid := unix.Gettid()
		if tid == unix.Getpid() {
			// The runtime parks the main thread instead of ending it. Hold it, so the
			// nested goroutine cannot land here, and hand it back untouched.
			done <- result{err: onThrowawayThread(fn)}
			runtime.UnlockOSThread()
			return
		}
		done <- result{tid: tid, err: fn(tid)}
		// Returning while locked makes the runtime end this thread.
	}()
	r := <-done
	if r.tid != 0 {
		waitThreadGone(r.tid)
	}
	return r.err
}

// waitThreadGone polls until thread tid of this process no longer exists, for up to 1 s. The
// poll interval grows from 20 µs to at most 500 µs: a thread ends within microseconds to a
// few milliseconds, and a longer interval (it was up to 50 ms) adds itself to every cookie
// repair that waits here.
func waitThreadGone(tid int) {
	pid := unix.Getpid()
	delay := 20 * time.Microsecond
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); delay *= 2 {
		if err := unix.Tgkill(pid, tid, 0); errors.Is(err, unix.ESRCH) {
			return
		}
		time.Sleep(min(delay, maxThreadPoll))
	}
}

// maxThreadPoll bounds waitThreadGone's poll interval.
const maxThreadPoll = 500 * time.Microsecond

// hasCap reports whether the calling thread has capability c in its effective set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}
