package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/testwait"
)

// fakeReloader records the layouts it is offered (and sends them on offered, if set) and
// refuses those with exclusive_x.
type fakeReloader struct {
	mu      sync.Mutex
	offers  []string
	offered chan string
}

func (f *fakeReloader) Reload(n *plan.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offers = append(f.offers, describe(n.Pools))
	if f.offered != nil {
		f.offered <- describe(n.Pools)
	}
	if _, ok := n.Pools.Pool("exclusive_x"); ok {
		return errors.New("a container would move")
	}
	return nil
}

func (f *fakeReloader) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.offers) }

// tickedReloader is a fakeReloader that, as the NRI agent does, gives watchPools the node
// in force through Node, which watchPools calls at the start of every tick: a call proves
// that the tick before it has finished.
type tickedReloader struct {
	*fakeReloader
	node  atomic.Pointer[plan.Node]
	ticks atomic.Int64
}

func (f *tickedReloader) Node() *plan.Node {
	f.ticks.Add(1)
	return f.node.Load()
}

func (f *tickedReloader) Reload(n *plan.Node) error {
	err := f.fakeReloader.Reload(n)
	if err == nil {
		f.node.Store(n)
	}
	return err
}

// wait waits until n ticks that start after this call have finished.
func (f *tickedReloader) wait(t *testing.T, n int64) {
	t.Helper()
	// Each tick starts with a call, so the n ticks after this call have ended once the
	// call after them comes.
	want := f.ticks.Load() + 1 + n
	testwait.Eventually(t, fmt.Sprintf("%d ticks", n), func() bool { return f.ticks.Load() >= want })
}

// TestWatchPools: a changed config is offered once; an unchanged or broken one is not; a
// refused one is not offered again until the file changes.
func TestWatchPools(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "poolconfig-a.yaml")
	write := func(body string) { // atomic, so that no tick sees a partial file
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("pools:\n  exclusive_a: {cpus: \"2-3\"}\n")
	topo, err := topology.Synthetic("sockets=1,cores=4")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pools: file, NodeName: "n1"}
	layout, err := resolvePools(nil, cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	fake := &tickedReloader{fakeReloader: &fakeReloader{}}
	node := plan.NewNode(topo, layout, plan.Policy{})
	fake.node.Store(node)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		watchPools(ctx, cfg, node, []reloader{fake}, 5*time.Millisecond, slog.New(slog.DiscardHandler))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	settle := func(want int, what string) {
		t.Helper()
		fake.wait(t, 3) // one tick reads the file as written; two more must offer nothing new
		if got := fake.count(); got != want {
			t.Fatalf("%s: %d reload offers, want %d (%v)", what, got, want, fake.offers)
		}
	}
	settle(0, "unchanged config")
	write("pools:\n  exclusive_a: {cpus: \"3\"}\n")
	settle(1, "changed config")
	write("pools:\n  exclusive_a: {cpus: \"9\"}\n") // CPU 9 is not on this node
	settle(1, "broken config")
	write("pools:\n  exclusive_x: {cpus: \"1\"}\n")
	settle(2, "config the agent refuses")
	write("pools:\n  exclusive_a: {cpus: \"2\"}\n")
	settle(3, "next change after a refusal")
	if fake.offers[0] != "default=0-2 exclusive_a=3" || fake.offers[2] != "default=0-1,3 exclusive_a=2" {
		t.Errorf("offers %q", fake.offers)
	}
}
