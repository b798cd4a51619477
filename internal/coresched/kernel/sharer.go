package kernel

import (
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
	sharerStart.Do(func() { go serveShares(make(chan struct{})) })
	done := make(chan error, 1)
	shareReqs <- shareReq{from: from, pid: pid, scope: scope, done: done}
	return <-done
}

// serveShares locks a thread other than the main one (closing locked then) and serves
// shareReqs on it until its cookie cannot be put back.
func serveShares(locked chan<- struct{}) {
	runtime.LockOSThread()
	tid, pid := unix.Gettid(), unix.Getpid()
	if tid == pid {
		// The runtime parks the main thread instead of ending it, and putting back copies its
		// cookie: hold it until a new worker has a thread of its own, then hand it back.
		next := make(chan struct{})
		go serveShares(next)
		<-next
		close(locked)
		runtime.UnlockOSThread()
		return
	}
	close(locked)
	for r := range shareReqs {
		err := prctl(cmdShareFrom, r.from, Thread)
		if err != nil { // the cookie of this thread is unchanged
			r.done <- err
			continue
		}
		err = prctl(cmdShareTo, r.pid, r.scope)
		if perr := putBack(tid, pid); perr != nil {
			// Answer once this thread is gone, and serve from another.
			go func() {
				waitThreadGone(tid)
				r.done <- err
				serveShares(make(chan struct{}))
			}()
			return // still locked: the runtime ends this thread
		}
		r.done <- err
	}
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
