package nriplugin_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/testwait"
)

// retryLog collects the waits the agent logs before each connection attempt.
type retryLog struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *retryLog) Enabled(context.Context, slog.Level) bool { return true }

func (r *retryLog) WithAttrs([]slog.Attr) slog.Handler { return r }

func (r *retryLog) WithGroup(string) slog.Handler { return r }

func (r *retryLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "cannot connect to runtime" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "retryIn" {
			r.mu.Lock()
			r.waits = append(r.waits, a.Value.Duration())
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *retryLog) got() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.waits)
}

// TestReconnectBackoffBounds: with no runtime to connect to, the agent retries after
// MinBackoff (DefaultMinBackoff if zero), doubling up to MaxBackoff (DefaultMaxBackoff if
// zero or below MinBackoff); a MaxBackoff equal to MinBackoff keeps the wait constant.
func TestReconnectBackoffBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		min, max time.Duration
		want     []time.Duration
	}{
		{"defaults", 0, 0, []time.Duration{nriplugin.DefaultMinBackoff}},
		{"min only", 5 * time.Millisecond, 0, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}},
		{"min equals max", 5 * time.Millisecond, 5 * time.Millisecond,
			[]time.Duration{5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}},
		{"max above min", 5 * time.Millisecond, 8 * time.Millisecond,
			[]time.Duration{5 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}},
		{"max below min", 5 * time.Millisecond, time.Millisecond,
			[]time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := &retryLog{}
			a := nriplugin.New(newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, slog.New(rl), nriplugin.Options{})
			t.Cleanup(func() { _ = a.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- a.Run(ctx, nriplugin.Connection{Socket: nritest.ShortDir(t) + "/none.sock", PluginName: "podfence",
					PluginIndex: "10", MinBackoff: tc.min, MaxBackoff: tc.max})
			}()
			testwait.Eventually(t, "connection attempts", func() bool { return len(rl.got()) >= len(tc.want) })
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := rl.got(); len(got) < len(tc.want) || !slices.Equal(got[:len(tc.want)], tc.want) {
				t.Errorf("waits %v, want %v first", got, tc.want)
			}
		})
	}
}
