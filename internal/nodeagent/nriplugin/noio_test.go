package nriplugin_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// gatedStore is a checkpoint on disk whose every call, once stalled, waits until the test
// opens the gate: a disk that does not answer (an fsync storm). Each call that waits is
// named on waiting.
type gatedStore struct {
	*checkpoint.Store
	open    chan struct{}
	waiting chan string

	mu      sync.Mutex
	stalled bool
	opened  sync.Once
}

func newGatedStore(tb testing.TB) *gatedStore {
	return &gatedStore{Store: openStore(tb, tb.TempDir()), open: make(chan struct{}), waiting: make(chan string, 64)}
}

func (g *gatedStore) stall()   { g.mu.Lock(); g.stalled = true; g.mu.Unlock() }
func (g *gatedStore) release() { g.opened.Do(func() { close(g.open) }) }

func (g *gatedStore) wait(op string) {
	g.mu.Lock()
	stalled := g.stalled
	g.mu.Unlock()
	if stalled {
		select {
		case g.waiting <- op:
		default:
		}
		<-g.open
	}
}

func (g *gatedStore) Load() ([]allocation.Allocation, error) { g.wait("Load"); return g.Store.Load() }
func (g *gatedStore) Put(a allocation.Allocation) error      { g.wait("Put"); return g.Store.Put(a) }
func (g *gatedStore) Delete(k allocation.Key) error          { g.wait("Delete"); return g.Store.Delete(k) }
func (g *gatedStore) WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error {
	g.wait("WriteBatch")
	return g.Store.WriteBatch(puts, dels)
}

// returns runs f and fails the whole test binary if it has not returned within d: f waits
// for something that never comes (the gate stays shut), so without the bound the run would
// end only at the test timeout.
func returns(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		panic(what + " waited for the stalled checkpoint")
	}
}

// TestNoEventWaitsForTheCheckpoint: with the checkpoint's disk stalled from the moment the
// agent exists, the runtime synchronizes it and relays whole lifecycles of exclusive
// containers (whose records are written), and a Shutdown, all answered; the records are
// written once the disk answers again.
func TestNoEventWaitsForTheCheckpoint(t *testing.T) {
	store := newGatedStore(t)
	a := nriplugin.New(newNode(t, testTopology, testPools), store, testLogger(t), nriplugin.Options{})
	store.stall()
	rt := newRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- a.Run(ctx, nriplugin.Connection{Socket: rt.sock, PluginName: "podfence", PluginIndex: "10"})
	}()
	t.Cleanup(func() {
		store.release() // a handler still waiting (on a failure) lets the agent stop
		cancel()
		<-ran
		_ = a.Close()
	})
	returns(t, "the first Synchronize", 10*time.Second, func() { _ = a.WaitSynchronized(context.Background(), 1) })
	rt.nri.BlockPluginSync().Unblock()
	var kept created
	for i := range 3 {
		pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 1}}`))
		c := rt.mustCreate(pod, "app", nil)
		rt.startCtr(c.ctr)
		if i == 2 {
			kept = c
			break
		}
		rt.stopCtr(c.ctr)
		rt.removeCtr(c.ctr)
		rt.removePod(pod)
	}
	returns(t, "Shutdown", 10*time.Second, func() { a.Shutdown(t.Context()) })
	if op := <-store.waiting; op != "WriteBatch" { // the writer holds the records meanwhile
		t.Fatalf("the checkpoint writer is stalled in %s, want WriteBatch", op)
	}
	store.release()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := store.Store.Load()
	if err != nil {
		t.Fatal(err)
	}
	checkHeld(t, "checkpoint", recs, "p:app:"+kept.cpus())
}
