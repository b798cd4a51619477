// Package testwait is how this repository's tests wait for something that happens on
// another goroutine or in another process: they poll a condition until it holds or a
// deadline passes. A test never sleeps a fixed time and then asserts: on a loaded machine
// the sleep is too short and the test fails, or (worse, when it checks that nothing
// happened) passes without having tested anything. To show that something did not happen,
// wait for a later event that proves the code ran past the point instead.
//
// Only tests import this package.
package testwait

import (
	"errors"
	"runtime"
	"testing"
	"time"
)

// Timeout is how long Eventually and EventuallyNil wait. It bounds only a failing test: a
// passing one returns as soon as its condition holds, so it is generous for loaded machines.
const Timeout = 30 * time.Second

// timeout is Timeout, shortened by this package's own tests.
var timeout = Timeout

// maxInterval caps the pause between two polls.
const maxInterval = 20 * time.Millisecond

var errFalse = errors.New("condition still false")

// Eventually polls cond until it returns true, failing the test (t.Fatalf) after Timeout.
// what names the awaited event in the failure message.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyNil(t, what, boolErr(cond))
}

// EventuallyNil polls f until it returns nil, failing the test (t.Fatalf) with f's last
// error after Timeout.
func EventuallyNil(t testing.TB, what string, f func() error) {
	t.Helper()
	start := time.Now()
	if err := poll(timeout, f); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", time.Since(start).Round(time.Millisecond), what, err)
	}
}

// Until polls cond until it returns true or timeout passes, and reports whether it held.
// It is for waits that must not fail the test themselves, such as clean-up.
func Until(timeout time.Duration, cond func() bool) bool {
	return poll(timeout, boolErr(cond)) == nil
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
