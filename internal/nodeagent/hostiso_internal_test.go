package nodeagent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// TestLoadNodeHostIsolation: the agent reads what the host isolated (sysfs, and the kernel
// command line under --proc) where it reads the topology, logs it, and its pools follow.
func TestLoadNodeHostIsolation(t *testing.T) {
	const fx = "isolcpus-smt-apart" // isolcpus=managed_irq,domain,2-7,18-23 nohz_full=2-7,18-23
	pools := filepath.Join(t.TempDir(), "poolconfig-a.yaml")
	if err := os.WriteFile(pools, []byte("unpooledCPUs: default\npools: {exclusive_e: {cpus: \"2-5\", isolatedCPUs: require}}\n"),
		0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pools: pools, NodeName: "n1", Sysfs: "../cpu/topology/testdata/sysfs/" + fx}
	cfg.CoreSched.ProcRoot = "../cpu/topology/testdata/procfs/" + fx
	var logs bytes.Buffer
	node, err := LoadNode(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Topology.Isolation.ManagedIRQ.String(); got != "2-7,18-23" {
		t.Errorf("managed_irq CPUs %q, want 2-7,18-23 (from the command line)", got)
	}
	if got := node.Pools.Default.CPUs.String(); got != "0-1,8-17,24-31" {
		t.Errorf("default pool %s, want the CPUs the kernel balances, 0-1,8-17,24-31", got)
	}
	for _, want := range []string{`msg="host isolation" cpus="isolcpus domain 2-7,18-23`,
		`CPUs 6-7,22-23 are isolated from the kernel's load balancing`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestWatchPoolsIsolatedCPUs: a pool config change of isolatedCPUs alone is offered, though
// it moves no CPU; the layout offered has it.
func TestWatchPoolsIsolatedCPUs(t *testing.T) {
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
	topo, err := topology.Synthetic("sockets=1,cores=4,isolcpus=2-3")
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
	write("pools:\n  exclusive_a: {cpus: \"2-3\", isolatedCPUs: require}\n")
	fake.wait(t, 3)
	if n := fake.count(); n != 1 {
		t.Fatalf("%d offers after isolatedCPUs changed, want 1", n)
	}
	if _, only, ok := fake.node.Load().IsolatedCPUs("exclusive_a"); !ok || !only {
		t.Errorf("the layout offered has exclusive_a without isolatedCPUs: require")
	}
}
