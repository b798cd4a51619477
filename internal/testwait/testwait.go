// Package testwait is how this repository's tests wait for something that happens on
// another goroutine or in another process: they poll a condition, or receive from a
// channel, until it holds or the test's deadline is near. A test never sleeps a fixed time
// and then asserts: on a loaded machine the sleep is too short and the test fails, or
// (worse, when it checks that nothing happened) passes without having tested anything. To
// show that something did not happen, wait for a later event that proves the code ran past
// the point instead.
//
// No wait here has a bound of its own: however slow a loaded machine is, a wait for
// something that comes ends when it comes. Only a wait for something that never comes
// fails, near the end of the test binary's time (go test -timeout), naming what it waited
// for. Where the code under test has timers of its own, a test runs it in a testing/synctest
// bubble (when the timer is its subject) or gives it limits longer than any run.
//
// Only tests import this package.
package testwait

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"
)

// Timeout is how long a wait lasts when the test has no deadline (go test -timeout 0, or
// a benchmark): go test's default timeout.
const Timeout = 10 * time.Minute

// grace is how long before the test binary's deadline a wait gives up, so that its
// failure, rather than go test's panic, reports the test.
const grace = 30 * time.Second

// deadline is Deadline; this package's own tests replace it.
var deadline = testDeadline

// Deadline is when a wait in tb for something that never comes gives up: grace before the
// test binary's deadline (at most half the time left), or Timeout from now without one. In
// a testing/synctest bubble it is Timeout from now on the bubble's clock, which moves only
// when every goroutine in the bubble waits: then nothing more can come.
func Deadline(tb testing.TB) time.Time { return deadline(tb) }

func testDeadline(tb testing.TB) time.Time {
	if end, ok := binaryDeadline(tb); ok {
		left := time.Until(end)
		return end.Add(-min(grace, left/2))
	}
	return time.Now().Add(Timeout)
}

// binaryDeadline is tb's Deadline, if it has one and is not in a synctest bubble (where
// testing.T.Deadline panics).
func binaryDeadline(tb testing.TB) (end time.Time, ok bool) {
	d, ok := tb.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return time.Time{}, false
	}
	defer func() {
		if recover() != nil {
			end, ok = time.Time{}, false
		}
	}()
	return d.Deadline()
}

// maxInterval caps the pause between two polls.
const maxInterval = 20 * time.Millisecond

var errFalse = errors.New("condition still false")

// Eventually polls cond until it returns true, failing the test (t.Fatalf) at Deadline.
// what names the awaited event in the failure message.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, what, boolErr(cond))
}

// EventuallyNil polls f until it returns nil, failing the test (t.Fatalf) with f's last
// error at Deadline.
func EventuallyNil(t testing.TB, what string, f func() error) {
	t.Helper()
	start := time.Now()
	if err := poll(time.Until(Deadline(t)), f); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
	}
}

// Receive returns the next value from ch, failing the test (t.Fatalf) at Deadline.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(time.Until(Deadline(t)))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", time.Since(start).Round(time.Millisecond), what)
		var zero T
		return zero
	}
}

// Until polls cond until it returns true or timeout passes, and reports whether it held.
// It is for waits that must not fail the test themselves, such as clean-up.
func Until(timeout time.Duration, cond func() bool) bool {
	return poll(timeout, boolErr(cond)) == nil
}

// Waiting reports whether a goroutine whose stack holds a call of function (as a stack dump
// names it, such as "nriplugin.(*Plugin).Flush(") waits: blocked on a channel, a lock, a
// condition, I/O or a sleep, rather than running. It shows that code has reached a wait,
// where a pause would only guess.
func Waiting(function string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		_, state, _ := bytes.Cut(header, []byte(" ["))
		state, _, _ = bytes.Cut(state, []byte("]"))
		state, _, _ = bytes.Cut(state, []byte(","))
		switch string(state) {
		case "running", "runnable", "syscall":
			continue
		}
		if bytes.Contains(g, []byte(function)) {
			return true
		}
	}
	return false
}

func boolErr(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errFalse
	}
}

// poll calls f at once, then after yielding the processor, then at intervals doubling
// from 50µs up to maxInterval, until it returns nil or timeout has passed; it returns f's
// last result. The short first intervals keep fast events fast; the cap keeps a poll cheap
// on a loaded machine.
func poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	err := f()
	if err == nil {
		return nil
	}
	runtime.Gosched()
	for interval := 50 * time.Microsecond; ; interval = min(2*interval, maxInterval) {
		if err = f(); err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		time.Sleep(min(interval, left))
	}
}
