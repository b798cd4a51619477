package kernel

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Share's SHARE_FROM and SHARE_TO run on one long-lived locked OS thread, the sharer, which
// puts its own cookie back after each call: SHARE_FROM the process's main thread, which no
// call of this package gives a cookie, checked by GET. A sharer whose cookie does not read
// back as the main thread's ends, as a throw-away thread does, and a new one takes over.
//
// A new thread per Share, ended afterwards, cost a thread start, its end and the wait for
// it on every call: in the QEMU guest most of a watcher repair's own time
// (BenchmarkQEMUExecToCookie in coresched/enforce).

type shareReq struct {
	from, pid int
	scope     Scope
	done      chan error
}

var (
	shareReqs   = make(chan shareReq)
	sharerStart sync.Once
)

// shareOnSharer runs SHARE_FROM(from) and SHARE_TO(pid, scope) on the sharer.
func shareOnSharer(from, pid int, scope Scope) error {
	sharerStart.Do(func() { OnOwnThread(serveShares) })
	done := make(chan error, 1)
	shareReqs <- shareReq{from: from, pid: pid, scope: scope, done: done}
	return <-done
}

// serveShares serves shareReqs on its thread (OnOwnThread) until the thread's cookie cannot
// be put back.
func serveShares() {
	tid, pid := unix.Gettid(), unix.Getpid()
	for r := range shareReqs {
		res := shareOn(tid, pid, r.from, r.pid, r.scope)
		if res.putBack != nil {
			// Answer once this thread is gone, and serve from another.
			go func() {
				waitThreadGone(tid)
				r.done <- res.share
				OnOwnThread(serveShares)
			}()
			return // the runtime ends this thread
		}
		r.done <- res.share
	}
}

// OnOwnThread starts fn on a goroutine locked for good to an OS thread other than the
// process's main thread: when fn returns, the runtime ends that thread and any cookie it
// kept. The main thread is never used: the runtime parks it instead of ending it, and its
// cookie is the one the others are given back.
func OnOwnThread(fn func()) { go ownThread(fn, nil) }

func ownThread(fn func(), locked chan<- struct{}) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// Hold the main thread until a new goroutine has a thread of its own, then hand it back.
		next := make(chan struct{})
		go ownThread(fn, next)
		<-next
		if locked != nil {
			close(locked)
		}
		runtime.UnlockOSThread()
		return
	}
	if locked != nil {
		close(locked)
	}
	fn()
}

// ShareHere is Share run on the calling OS thread, with no handoff to the sharer thread:
// for a caller whose goroutine is locked to its thread for good (runtime.LockOSThread),
// such as the process-event watcher. The thread carries the cookie during the call and gets
// the main thread's back, checked. When that fails, the error wraps ErrThreadTainted and the
// caller must end its goroutine still locked, so that the runtime ends the thread. The main
// thread itself is refused: it is what the others get their cookie back from.
func (Prctl) ShareHere(from, pid int, scope Scope) error {
	if err := checkArgs(cmdShareFrom, from, Thread); err != nil {
		return err
	}
	if err := checkArgs(cmdShareTo, pid, scope); err != nil {
		return err
	}
	tid, main := unix.Gettid(), unix.Getpid()
	if tid == main {
		return errors.New("core scheduling share: ShareHere on the main thread")
	}
	res := shareOn(tid, main, from, pid, scope)
	if res.putBack != nil {
		return fmt.Errorf("%w: %w", ErrThreadTainted, errors.Join(res.share, res.putBack))
	}
	return res.share
}

// shared is what shareOn did: the share's error, and putBack's.
type shared struct{ share, putBack error }

// shareOn runs SHARE_FROM(from) and SHARE_TO(pid, scope) on thread tid, the caller's, and
// puts back the cookie of the main thread.
func shareOn(tid, main, from, pid int, scope Scope) shared {
	if err := prctl(cmdShareFrom, from, Thread); err != nil { // the cookie of this thread is unchanged
		return shared{share: err}
	}
	err := prctl(cmdShareTo, pid, scope)
	return shared{share: err, putBack: putBack(tid, main)}
}

// putBack gives thread tid the cookie of the process's main thread, pid, and checks it.
func putBack(tid, pid int) error {
	if err := prctl(cmdShareFrom, pid, Thread); err != nil {
		return err
	}
	own, err := get(tid)
	if err != nil {
		return err
	}
	main, err := get(pid)
	if err != nil {
		return err
	}
	if own != main {
		return fmt.Errorf("sharer thread %d has cookie %#x after putting back, main thread %#x", tid, uint64(own), uint64(main))
	}
	return nil
}
