// Package asynclog is a slog.Handler that never makes its caller wait for the log output:
// records are queued (a bounded queue) and one goroutine formats and writes them through the
// handler it wraps. When the output does not keep up (a container's stderr is a pipe the
// runtime drains; a runtime slowed by its disk stops draining it) the records that do not fit
// are dropped and counted, and a warning with the count is logged once the output drains.
// The agent's NRI handlers log every decision, so a blocked stderr would otherwise block them.
package asynclog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultRecords is the queue length `podfence agent` uses: a burst of 4,096 records (a few
// seconds of a busy node's decisions) waits for a slow output before any is dropped.
const DefaultRecords = 4096

// Handler queues records for inner. Create it with New and stop it with Close.
type Handler struct {
	q     *queue
	inner slog.Handler
}

// queue is shared by a Handler and those WithAttrs and WithGroup derive from it.
type queue struct {
	root slog.Handler // the drop warnings go here
	max  int

	mu      sync.Mutex
	recs    []entry
	dropped uint64 // since the last warning
	total   uint64
	closed  bool
	wake    chan struct{} // capacity 1: recs is not empty, or closed
	done    chan struct{}
}

type entry struct {
	h   slog.Handler
	rec slog.Record
}

// New returns a handler that queues up to max records for inner (DefaultRecords if max is 0
// or less) and starts its writer.
func New(inner slog.Handler, max int) *Handler {
	if max <= 0 {
		max = DefaultRecords
	}
	q := &queue{root: inner, max: max, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return &Handler{q: q, inner: inner}
}

// Enabled is inner's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle queues r, or drops it when the queue is full or closed; it never blocks on the output
// and never fails.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	q := h.q
	q.mu.Lock()
	if q.closed || len(q.recs) >= q.max {
		q.dropped++
		q.total++
		q.mu.Unlock()
		return nil
	}
	q.recs = append(q.recs, entry{h: h.inner, rec: r.Clone()})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// WithAttrs and WithGroup derive from inner and share the queue.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{q: h.q, inner: h.inner.WithAttrs(as)}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{q: h.q, inner: h.inner.WithGroup(name)}
}

// Dropped is how many records were dropped so far.
func (h *Handler) Dropped() uint64 {
	h.q.mu.Lock()
	defer h.q.mu.Unlock()
	return h.q.total
}

// Close writes the records queued and stops the writer; later records are dropped. It waits
// for the output.
func (h *Handler) Close() error {
	q := h.q
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default: // a wake is pending: the writer sees closed after it
	}
	<-q.done
	return nil
}

func (q *queue) run() {
	defer close(q.done)
	for range q.wake {
		q.mu.Lock()
		recs, dropped, closed := q.recs, q.dropped, q.closed
		q.recs, q.dropped = nil, 0
		q.mu.Unlock()
		for _, e := range recs {
			_ = e.h.Handle(context.Background(), e.rec)
		}
		if dropped > 0 {
			r := slog.NewRecord(time.Now(), slog.LevelWarn, "log records dropped: the log output did not keep up", 0)
			r.AddAttrs(slog.Uint64("dropped", dropped))
			_ = q.root.Handle(context.Background(), r)
		}
		if closed {
			return
		}
	}
}
