package admission

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults of Limits, for the webhook's 128Mi. A 2.9 MB review with one large annotation
// allocates 9 MB and keeps its decoded pod, 3 MB, while Mutate runs; a small pod of
// maxPodValues "null" containers allocates 35 MB and its heap peaks at about 12 MB, 4 of
// them at once at about 55 MB (BenchmarkLargeReview, TestConcurrentLargeReviews).
const (
	DefaultMaxInFlight      = 4
	DefaultMaxInFlightBytes = 3 << 20 // the API server's limit on an object: one such review runs alone
	DefaultInFlightWait     = time.Second
	// DefaultReviewTimeout is the API server's default webhook timeout; a shorter one it
	// sends (the timeout query parameter) applies instead.
	DefaultReviewTimeout = 10 * time.Second
)

// Limits bound the reviews a handler works on at once. A review counts its body's bytes
// against MaxInFlightBytes, and at least MaxInFlightBytes/MaxInFlight, so that at most
// MaxInFlight small reviews run at once; a body larger than MaxInFlightBytes runs alone.
// Zero fields take the defaults above.
type Limits struct {
	MaxInFlight      int           // reviews in flight, at most maxInFlight
	MaxInFlightBytes int64         // request bodies in flight, at most maxInFlightBytes
	Wait             time.Duration // how long a review waits for room before it is refused with 429
	Timeout          time.Duration // how long a review may take, from its request's arrival; at most 15s
}

// Bounds on Limits, so that their products fit an int64.
const (
	maxInFlight      = 1 << 20
	maxInFlightBytes = 1 << 40
)

func (l Limits) withDefaults() Limits {
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxInFlightBytes <= 0 {
		l.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if l.Wait <= 0 {
		l.Wait = DefaultInFlightWait
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultReviewTimeout
	}
	l.MaxInFlight, l.MaxInFlightBytes = min(l.MaxInFlight, maxInFlight), min(l.MaxInFlightBytes, maxInFlightBytes)
	l.Timeout = min(l.Timeout, readTimeout) // a review's read deadline replaces the server's
	return l
}

// unit is the least a review counts: MaxInFlightBytes/MaxInFlight, rounded up.
func (l Limits) unit() int64 {
	n := int64(l.MaxInFlight)
	return (l.MaxInFlightBytes + n - 1) / n
}

// capacity is what the reviews in flight count together: MaxInFlight units, which is
// MaxInFlightBytes rounded up to a multiple of MaxInFlight.
func (l Limits) capacity() int64 { return l.unit() * int64(l.MaxInFlight) }

// weight is what a review with a body of n bytes (-1: unknown) counts.
func (l Limits) weight(n int64) int64 {
	if n < 0 {
		return l.capacity()
	}
	return min(max(n, l.unit()), l.capacity())
}

// errBusy is a review that found no room in time.
var errBusy = errors.New("busy")

// limiter is a weighted semaphore: acquire waits, first come first served, until the
// weight fits next to those held.
type limiter struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	waiters  list.List // of *waiter, in arrival order
}

type waiter struct {
	n     int64
	ready chan struct{} // closed when the weight is granted
}

func newLimiter(capacity int64) *limiter { return &limiter{capacity: capacity} }

// acquire takes n, waiting at most wait, or until ctx ends; it returns errBusy or ctx's
// error when it did not get n.
func (l *limiter) acquire(ctx context.Context, n int64, wait time.Duration) error {
	l.mu.Lock()
	if l.used+n <= l.capacity && l.waiters.Len() == 0 {
		l.used += n
		l.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	elem := l.waiters.PushBack(w)
	l.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = errBusy
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile
		if errors.Is(err, errBusy) {
			return nil
		}
		l.used -= n
		l.grant()
	default:
		front := l.waiters.Front() == elem
		l.waiters.Remove(elem)
		if front { // those behind may fit now
			l.grant()
		}
	}
	return err
}

func (l *limiter) release(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= n
	if l.used < 0 {
		panic("admission: limiter released more than acquired")
	}
	l.grant()
}

// grant admits waiters in order while they fit.
func (l *limiter) grant() {
	for e := l.waiters.Front(); e != nil; e = l.waiters.Front() {
		w := e.Value.(*waiter)
		if l.used+w.n > l.capacity {
			return
		}
		l.used += w.n
		l.waiters.Remove(e)
		close(w.ready)
	}
}

// state returns the weight held and the number of reviews waiting.
func (l *limiter) state() (used int64, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used, l.waiters.Len()
}

// clip bounds s for a log line or a message: at most n bytes, cut on a rune boundary and
// marked with the full length.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", prefix(s, n), len(s))
}

// prefix is s cut to at most n bytes on a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
