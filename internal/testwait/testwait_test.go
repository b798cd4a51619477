package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestEventuallyWaitsForAnotherGoroutine(t *testing.T) {
	var n atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				n.Add(1)
			}
		}
	}()
	Eventually(t, "a thousand increments", func() bool { return n.Load() >= 1000 })
	polls := 0
	EventuallyNil(t, "the third poll", func() error {
		if polls++; polls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
}

func TestUntilGivesUp(t *testing.T) {
	start := time.Now()
	polls := 0
	if Until(20*time.Millisecond, func() bool { polls++; return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", d)
	}
	if polls < 2 {
		t.Errorf("%d polls, want at least 2", polls)
	}
	if !Until(time.Millisecond, func() bool { return true }) {
		t.Error("Until missed a condition that holds at once")
	}
}

// TestEventuallyFails: a condition that never holds fails the test, naming what it waited
// for and the last error.
func TestEventuallyFails(t *testing.T) {
	shorten(t, 20*time.Millisecond)
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyNil(rec, "the impossible", func() error { return errors.New("never") })
	}()
	<-done
	if !rec.failed || !strings.HasSuffix(rec.msg, "waiting for the impossible: never") {
		t.Errorf("failed %v, message %q; want a failure naming the impossible and the error never", rec.failed, rec.msg)
	}
}

// TestReceiveFails: a channel that never delivers fails the test at the deadline, naming
// what it waited for; a value sent is returned.
func TestReceiveFails(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Receive(t, ch, "seven"); v != 7 {
		t.Errorf("Receive = %d, want 7", v)
	}
	shorten(t, 20*time.Millisecond)
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Receive(rec, ch, "a value never sent")
	}()
	<-done
	if !rec.failed || !strings.HasSuffix(rec.msg, "waiting for a value never sent") {
		t.Errorf("failed %v, message %q; want a failure naming a value never sent", rec.failed, rec.msg)
	}
}

// TestDeadline: a wait ends shortly before the test binary's own deadline, leaving it time
// to report; without one (a benchmark), and in a synctest bubble, Timeout from now.
func TestDeadline(t *testing.T) {
	if end, ok := t.Deadline(); ok {
		if d := Deadline(t); !d.Before(end) || end.Sub(d) > grace {
			t.Errorf("Deadline %s, test binary's deadline %s: want at most %s before it", d, end, grace)
		}
	}
	b := &testing.B{}
	if left := time.Until(Deadline(b)); left <= Timeout-time.Minute || left > Timeout {
		t.Errorf("Deadline without a test deadline in %s, want %s", left, Timeout)
	}
	synctest.Test(t, func(t *testing.T) {
		if left := time.Until(Deadline(t)); left != Timeout {
			t.Errorf("Deadline in a synctest bubble in %s, want %s", left, Timeout)
		}
	})
}

// TestWaiting: a goroutine blocked in a function is waiting there; once it runs on, and in
// a function nothing calls, it is not.
func TestWaiting(t *testing.T) {
	block, done := make(chan struct{}), make(chan struct{})
	go func() { blockedIn(block); close(done) }()
	Eventually(t, "blockedIn to wait", func() bool { return Waiting("testwait.blockedIn(") })
	if Waiting("testwait.neverCalled(") {
		t.Error("a function nothing calls is waiting")
	}
	close(block)
	<-done
	if Waiting("testwait.blockedIn(") {
		t.Error("blockedIn still waiting after it returned")
	}
}

//go:noinline
func blockedIn(c chan struct{}) { <-c }

// shorten makes this test's waits end after d.
func shorten(t *testing.T, d time.Duration) {
	deadline = func(testing.TB) time.Time { return time.Now().Add(d) }
	t.Cleanup(func() { deadline = testDeadline })
}

// recorder catches Fatalf: it records the message and ends the goroutine, as t.Fatalf does.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
