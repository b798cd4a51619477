package asynclog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/podfence/podfence/internal/asynclog"
)

// gate is a log output whose first Write blocks until release is closed; entered is closed
// when it starts.
type gate struct {
	entered, release chan struct{}
	once             sync.Once

	mu  sync.Mutex
	out bytes.Buffer
}

func newGate() *gate { return &gate{entered: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) Write(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.out.Write(p)
}

func (g *gate) lines() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Split(strings.TrimSuffix(g.out.String(), "\n"), "\n")
}

// TestLoggingNeverWaitsForTheOutput: while the output is blocked, logging returns at once;
// the records beyond the queue's length are dropped, and once the output drains they are
// counted in one warning after the records kept, in their order, with their attributes.
func TestLoggingNeverWaitsForTheOutput(t *testing.T) {
	out := newGate()
	h := asynclog.New(slog.NewTextHandler(out, nil), 4)
	log := slog.New(h).With("component", "test")
	log.Info("first")
	<-out.entered // the writer holds "first" and waits for the output
	for i := range 9 {
		log.Info("more", "i", i) // 4 fit in the queue, 5 do not
	}
	if got := h.Dropped(); got != 5 {
		t.Errorf("Dropped() = %d with the output blocked, want 5", got)
	}
	close(out.release)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	got := out.lines()
	want := []string{"msg=first component=test", "msg=more component=test i=0", "msg=more component=test i=1",
		"msg=more component=test i=2", "msg=more component=test i=3",
		`level=WARN msg="log records dropped: the log output did not keep up" dropped=5`}
	if len(got) != len(want) {
		t.Fatalf("output:\n%s\nwant %d lines ending in:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("line %d = %q, want it to end in %q", i, got[i], want[i])
		}
	}
	log.Info("after close")
	if got := h.Dropped(); got != 6 {
		t.Errorf("Dropped() = %d after a record logged once closed, want 6", got)
	}
}

// TestLevelsAndGroupsAreTheInnerHandlers: Enabled is the inner handler's, and a group
// derived from the handler writes through the same queue.
func TestLevelsAndGroupsAreTheInnerHandlers(t *testing.T) {
	var out bytes.Buffer
	h := asynclog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}), 0)
	log := slog.New(h)
	log.Info("hidden")
	log.WithGroup("g").Warn("shown", "k", "v")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `msg=shown g.k=v`) {
		t.Errorf("output %q: want the warning alone, its attribute in group g", got)
	}
}
