package nodeagent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// TestWatchPoolsRequestAPI: a pool config change of requestAPI alone is offered (the device
// plugin must drop or take the pool), though it moves no CPU; the layout offered says so.
func TestWatchPoolsRequestAPI(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "poolconfig-a.yaml")
	write := func(body string) {
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
	fake.wait(t, 2)
	if n := fake.count(); n != 0 {
		t.Fatalf("%d offers of an unchanged config", n)
	}
	write("pools:\n  exclusive_a: {cpus: \"2-3\", requestAPI: dra}\n")
	fake.wait(t, 3)
	if n := fake.count(); n != 1 {
		t.Fatalf("%d offers after requestAPI changed, want 1", n)
	}
	if p, _ := fake.node.Load().Pools.Pool("exclusive_a"); !p.ViaDRA() {
		t.Errorf("the layout offered has exclusive_a with requestAPI %q, want dra", p.API)
	}
}
