package nriplugin_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/testwait"
)

// logBuf is an agent's log as text, kept for the test to read (and echoed to the test log).
type logBuf struct {
	tb  testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	l.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lines returns the log lines that contain every one of parts.
func (l *logBuf) lines(parts ...string) []string {
	var out []string
	for line := range strings.SplitSeq(l.String(), "\n") {
		if line != "" && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			out = append(out, line)
		}
	}
	return out
}

func newLogBuf(tb testing.TB) (*logBuf, *slog.Logger) {
	l := &logBuf{tb: tb}
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// syncedLog is synced with options, logging to the returned buffer.
func syncedLog(t *testing.T, pn *plan.Node, cp nriplugin.Checkpoint, rn *node, opts nriplugin.Options) (*nriplugin.Plugin, *logBuf) {
	t.Helper()
	lb, log := newLogBuf(t)
	a := nriplugin.New(pn, cp, log, opts)
	t.Cleanup(func() { _ = a.Close() })
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	a.Prepare(ctx) // as Run does before connecting
	if upd, err := a.Synchronize(ctx, rn.pods, rn.ctrs); err != nil || len(upd) > 0 {
		t.Fatalf("Synchronize: %v, updates %v", err, upd)
	}
	return a, lb
}
