package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/observe/events"
	"github.com/podfence/podfence/internal/testwait"
)

// sink records what it is given; it fails events whose reason is "Fail".
type sink struct {
	mu     sync.Mutex
	posted []string
	done   chan struct{} // gets a value per call
}

func (s *sink) Post(_ context.Context, e events.Event, _ time.Time) error {
	defer func() { s.done <- struct{}{} }()
	if e.Reason == "Fail" {
		return errors.New("forbidden")
	}
	s.mu.Lock()
	s.posted = append(s.posted, e.Pod+":"+e.Reason)
	s.mu.Unlock()
	return nil
}

// clock is a fake time that tests move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRecorderRateLimits: per pod and reason a burst then one per interval; a global cap
// over all pods; failures and drops counted.
func TestRecorderRateLimits(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	s := &sink{done: make(chan struct{}, 100)}
	r := events.New(s, events.Options{PerPodBurst: 2, PerPodEvery: time.Minute, Burst: 4, Every: time.Second, Now: clk.Now},
		slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	limited := 0
	send := func(pod, reason string, posts int) {
		t.Helper()
		r.Record(events.Event{Namespace: "ns", Pod: pod, Reason: reason})
		if posts == 0 { // held back: wait until the recorder has counted it, before the clock moves
			limited++
			testwait.Eventually(t, fmt.Sprintf("%s %s to be counted as rate limited", pod, reason),
				func() bool { return counted(t, r, "rate_limited") >= limited })
		}
		for range posts {
			testwait.Receive(t, s.done, fmt.Sprintf("%s %s to be posted", pod, reason))
		}
	}
	send("a", "Refused", 1)
	send("a", "Refused", 1)
	send("a", "Refused", 0) // third within a minute: held back
	send("a", "Other", 1)   // another reason has its own bucket
	send("b", "Refused", 1) // the fourth post empties the global bucket
	send("c", "Refused", 0)
	clk.add(time.Second) // one global token back
	send("c", "Refused", 1)
	clk.add(time.Minute)
	send("a", "Fail", 1)
	testwait.Eventually(t, "the failed post to be counted", func() bool { return counted(t, r, "failed") >= 1 })
	cancel()
	<-done
	s.mu.Lock()
	got := strings.Join(s.posted, " ")
	s.mu.Unlock()
	if got != "a:Refused a:Refused a:Other b:Refused c:Refused" {
		t.Errorf("posted %q", got)
	}
	wantCounts(t, r, 5, 2, 0, 1)
}

// TestRecordNeverBlocks: with nothing draining the queue, events beyond it are dropped.
func TestRecordNeverBlocks(t *testing.T) {
	r := events.New(&sink{}, events.Options{Queue: 2}, slog.New(slog.DiscardHandler))
	for range 5 {
		r.Record(events.Event{Pod: "p"})
	}
	wantCounts(t, r, 0, 0, 3, 0)
}

// counted is the recorder's count of events with one result.
func counted(t *testing.T, r *events.Recorder, result string) int {
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

func wantCounts(t *testing.T, r *events.Recorder, sent, limited, full, failed int) {
	t.Helper()
	want := fmt.Sprintf(`# HELP podfence_events_total Kubernetes Events on pods by result: sent, rate_limited, queue_full (dropped at once), failed (the API said no).
# TYPE podfence_events_total counter
podfence_events_total{result="failed"} %d
podfence_events_total{result="queue_full"} %d
podfence_events_total{result="rate_limited"} %d
podfence_events_total{result="sent"} %d
`, failed, full, limited, sent)
	if err := testutil.CollectAndCompare(r.Collector(), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
