package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/podapi"
)

// testNode is a 1-socket, 4-core SMT2 node (core c: CPUs c and c+4) split by poolYAML.
func testNode(t *testing.T, poolYAML string) *plan.Node {
	t.Helper()
	topo, err := topology.Synthetic("sockets=1,cores=4,threads=2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("poolconfig.yaml", []byte(poolYAML))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, layout, plan.Policy{})
}

const (
	poolsBefore = `pools: {default: {cpus: "0,4"}, shared_s: {cpus: "1,5"}, exclusive_a: {cpus: "2-3,6-7", ` +
		`hyperThreadingPolicy: multiThreaded}}`
	poolsAfter = `pools: {default: {cpus: "0,4"}, shared_s: {cpus: "1"}, exclusive_a: {cpus: "2-3,5-7", hyperThreadingPolicy: multiThreaded}}`
)

// TestPendingPoolConfigReported: a pending config shows in the report, in a metric and in
// one Warning Event on the node naming the blocking container, and all three clear when
// the config is taken.
func TestPendingPoolConfigReported(t *testing.T) {
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := nriplugin.New(testNode(t, poolsBefore), store, log, nriplugin.Options{})
	defer a.Close()
	pod := &api.PodSandbox{Id: "s1", Uid: "uid-1", Name: "web", Namespace: "shop",
		Annotations: map[string]string{podapi.AnnotationCPUPools: `{"app": {"shared_s": 500}}`}}
	ctr := &api.Container{Id: "c1", PodSandboxId: "s1", Name: "app"}
	if _, _, err := a.CreateContainer(context.Background(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	rec := &fakeRecorder{}
	o := &reporter{rec: rec, seen: map[string]bool{}, reg: reg, cfg: Config{NodeName: "node-a"}}
	if _, err := o.attach(a); err != nil {
		t.Fatal(err)
	}
	gauge := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader("# HELP podfence_pool_config_pending_blocking_containers "+
			"Running containers that keep a changed pool config from being taken (they would have to move); -1 when no config is pending.\n"+
			"# TYPE podfence_pool_config_pending_blocking_containers gauge\npodfence_pool_config_pending_blocking_containers "+want+"\n"),
			"podfence_pool_config_pending_blocking_containers"); err != nil {
			t.Error(err)
		}
	}
	gauge("-1")

	if err := a.Reload(testNode(t, poolsAfter)); err == nil {
		t.Fatal("a config moving a running shared container was taken")
	}
	r := o.report(a)
	if p := r.PendingPoolConfig; p == nil || len(p.Blocking) != 1 || p.Blocking[0].Pod != "web" || !strings.Contains(p.Blocking[0].Reason, "runs on CPUs 1,5") {
		t.Fatalf("report's pending config: %+v", p)
	}
	gauge("1")
	o.pending(a)
	o.pending(a) // once per pending config
	if len(rec.got) != 1 || rec.got[0].Node != "node-a" || rec.got[0].Reason != "PoolConfigPending" ||
		!strings.Contains(rec.got[0].Message, "shop/web app") {
		t.Fatalf("events: %+v", rec.got)
	}

	if _, err := a.StopContainer(context.Background(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil { // the layout is taken once written down, after the event
		t.Fatal(err)
	}
	if r := o.report(a); r.PendingPoolConfig != nil {
		t.Errorf("still pending after its blocker stopped: %+v", r.PendingPoolConfig)
	}
	gauge("-1")
	if node, _ := a.Snapshot(); node.Pools.Default.CPUs.String() != "0,4" || mustPool(t, node, "shared_s") != "1" {
		t.Errorf("layout in force after the blocker stopped: %s", describe(node.Pools))
	}
}

func mustPool(t *testing.T, n *plan.Node, name string) string {
	t.Helper()
	p, ok := n.Pools.Pool(name)
	if !ok {
		t.Fatalf("no pool %s", name)
	}
	return p.CPUs.String()
}

// TestStartLayout: after a restart, the agent starts with the layout its running containers
// were placed by and takes a changed config file only as Reload would.
func TestStartLayout(t *testing.T) {
	dir := t.TempDir()
	before, after := testNode(t, poolsBefore), testNode(t, poolsAfter)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if start, next := startLayout(dir, after, log); start != after || next != nil {
		t.Fatalf("no layout recorded: start %s next %v, want the file's and nothing next", describe(start.Pools), next)
	}
	if err := saveInForce(dir, before.Pools); err != nil {
		t.Fatal(err)
	}
	start, next := startLayout(dir, after, log)
	if layoutKey(start.Pools) != layoutKey(before.Pools) || next != after {
		t.Fatalf("start %s next %v, want the recorded layout then the file's", describe(start.Pools), next)
	}
	if start, next := startLayout(dir, before, log); start != before || next != nil {
		t.Fatalf("file equal to the recorded layout: start %s next %v", describe(start.Pools), next)
	}
}

// TestDegradedPoolsEvent: pools with offline CPUs are reported once as a Warning Event on
// the node, and again only when the offline CPUs change.
func TestDegradedPoolsEvent(t *testing.T) {
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := nriplugin.New(testNode(t, poolsBefore), store, slog.New(slog.NewTextHandler(io.Discard, nil)), nriplugin.Options{})
	defer a.Close()
	rec := &fakeRecorder{}
	o := &reporter{rec: rec, seen: map[string]bool{}, cfg: Config{NodeName: "node-a"}}
	o.degradedPools(a)
	if len(rec.got) != 0 {
		t.Fatalf("events with every CPU online: %+v", rec.got)
	}
	for _, offline := range []string{"3,7", "3,7", "7"} {
		topo, err := topology.Synthetic("sockets=1,cores=4,threads=2,offline=" + offline)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.SetTopology(topo); err != nil {
			t.Fatal(err)
		}
		o.degradedPools(a)
	}
	if len(rec.got) != 2 || rec.got[0].Reason != "PoolDegraded" || rec.got[0].Node != "node-a" ||
		!strings.Contains(rec.got[0].Message, "pool exclusive_a: CPUs 3,7") || !strings.Contains(rec.got[1].Message, "pool exclusive_a: CPUs 7") {
		t.Fatalf("events: %+v", rec.got)
	}
}
