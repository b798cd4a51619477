package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
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
	timeout = 20 * time.Millisecond
	defer func() { timeout = Timeout }()
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
