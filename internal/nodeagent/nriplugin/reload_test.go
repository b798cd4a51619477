package nriplugin_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/testwait"
)

// TestReload: a new pool config is taken only if every running container fits it as it
// runs; otherwise the agent keeps the old config and says which container would move.
func TestReload(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 2}, "web": {"shared_s": 500}}`))
	app := rt.mustCreate(pod, "app", nil)
	rt.mustCreate(pod, "web", nil)
	check(t, app, want{cpus: "2,10", mems: "0", exclusive: "2,10"})

	// exclusive_a shrinks to core 3: app's CPUs 2,10 would have to move.
	shrunk := strings.Replace(testPools, `exclusive_a: {cpus: "2-3,10-11"`, `exclusive_a: {cpus: "3,11"`, 1)
	err := ar.Reload(newNode(t, testTopology, shrunk))
	if !errors.Is(err, nriplugin.ErrPending) || !strings.Contains(err.Error(),
		"the old one stays in force: running containers would have to move") ||
		!strings.Contains(err.Error(), `pool "default"`) {
		t.Fatalf("Reload(shrunk) err = %v, want a refusal naming the move", err)
	}
	check(t, rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_a": 2}}`)), "app", nil),
		want{cpus: "3,11", mems: "0", exclusive: "3,11"}) // old layout still in force

	// The shared pool goes away while web runs on it: refused too.
	noShared := strings.Replace(testPools, `  shared_s:    {cpus: "1,9"}`+"\n", "", 1)
	if err := ar.Reload(newNode(t, testTopology, noShared)); err == nil || !strings.Contains(err.Error(),
		`container uid-pod0001/web (ns/p web): pool "shared_s" is not in the pool config`) {
		t.Fatalf("Reload(noShared) err = %v, want a refusal naming the shared pool", err)
	}

	// exclusive_b gives core 7 to a new pool exclusive_c: nobody runs there, so it is taken.
	grown := strings.Replace(testPools, `exclusive_b: {cpus: "4-7,12-15"`, `exclusive_c: {cpus: "7,15", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-6,12-14"`, 1)
	if err := ar.Reload(newNode(t, testTopology, grown)); err != nil {
		t.Fatalf("Reload(grown): %v", err)
	}
	checkHeld(t, "after reload", ar.Allocations(), "p:app:2,10", "p:web:", "q:app:3,11")
	check(t, rt.mustCreate(rt.runPod("r", poolReq(`{"app": {"exclusive_c": 2}}`)), "app", nil),
		want{cpus: "7,15", mems: "1", exclusive: "7,15"})
}

// TestReloadWaitsForEveryRunningContainer: a new config that changes the CPUs of the shared
// or default pool waits while a container runs there (none of its CPUs is handed out
// exclusively meanwhile), and is taken the moment the last blocking container is released.
func TestReloadWaitsForEveryRunningContainer(t *testing.T) {
	taken := make(chan *plan.Node, 1)
	rt := newRuntime(t)
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), openStore(t, t.TempDir()),
		nriplugin.Options{LayoutChanged: func(n *plan.Node) { taken <- n }})
	shared := rt.mustCreate(rt.runPod("s", poolReq(`{"app": {"shared_s": 500}}`)), "app", nil)
	plain := rt.mustCreate(rt.runPod("d", nil), "app", nil)

	// CPU 9 leaves the shared pool and CPU 8 the default pool for a new exclusive pool.
	moved := strings.NewReplacer(`default:     {cpus: "0,8"}`, `default:     {cpus: "0"}`,
		`shared_s:    {cpus: "1,9"}`, `shared_s:    {cpus: "1"}
  exclusive_c: {cpus: "8-9", hyperThreadingPolicy: multiThreaded}`).Replace(testPools)
	err := ar.Reload(newNode(t, testTopology, moved))
	if !errors.Is(err, nriplugin.ErrPending) || !strings.Contains(err.Error(),
		"runs on CPUs 1,9") || !strings.Contains(err.Error(), "runs on CPUs 0,8") {
		t.Fatalf("Reload err = %v, want it pending on both containers", err)
	}
	p, ok := ar.PendingReload()
	if !ok || len(p.Blocking) != 2 || p.Blocking[0].Pod != "d" || p.Blocking[1].Pod != "s" {
		t.Fatalf("pending = %+v, %v; want pods d and s blocking", p, ok)
	}
	if _, err := rt.create(rt.runPod("x", poolReq(`{"app": {"exclusive_c": 1}}`)), "app", nil); err == nil {
		t.Fatal("a CPU of the pending config was handed out while containers run on it")
	}

	rt.removeCtr(shared.ctr)
	if p, _ := ar.PendingReload(); len(p.Blocking) != 1 || p.Blocking[0].Pod != "d" {
		t.Fatalf("after the shared container ended, pending = %+v; want pod d alone blocking", p)
	}
	select {
	case <-taken:
		t.Fatal("config taken while the default-pool container still runs on CPU 8")
	default:
	}
	rt.removeCtr(plain.ctr)
	n := testwait.Receive(t, taken, "the pending config to be taken after its last blocking container ended")
	if _, ok := n.Pools.Pool("exclusive_c"); !ok {
		t.Fatalf("the layout taken has no exclusive_c: %v", n.Pools.Source)
	}
	if err := ar.Flush(); err != nil { // written down (LayoutChanged), then taken
		t.Fatal(err)
	}
	if _, ok := ar.PendingReload(); ok {
		t.Error("a config is still pending after it was taken")
	}
	check(t, rt.mustCreate(rt.runPod("y", poolReq(`{"app": {"exclusive_c": 2}}`)), "app", nil),
		want{cpus: "8-9", mems: "0", exclusive: "8,9"})
	check(t, rt.mustCreate(rt.runPod("z", poolReq(`{"app": {"shared_s": 500}}`)), "app", nil),
		want{cpus: "1", mems: "0", quota: 50000, period: 100000, shared: "1"})
}

// TestReloadRetriedWhenABlockerEnds: a pool turning singleThreaded waits while two containers
// run on the two threads of one of its cores (each blocks it: the other runs on its
// sibling); when one of them ends, the other blocks it no more, and it is taken then.
func TestReloadRetriedWhenABlockerEnds(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	rt.mustCreate(rt.runPod("p", nil), "a", exclusiveCPUs("2"))
	b := rt.mustCreate(rt.runPod("q", nil), "b", exclusiveCPUs("10"))
	single := strings.Replace(testPools, `exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: multiThreaded}`,
		`exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: singleThreaded}`, 1)
	if err := ar.Reload(newNode(t, testTopology, single)); !errors.Is(err, nriplugin.ErrPending) {
		t.Fatalf("Reload err = %v, want it pending", err)
	}
	if p, _ := ar.PendingReload(); len(p.Blocking) != 2 {
		t.Fatalf("pending = %+v, want both containers blocking", p)
	}
	rt.removeCtr(b.ctr)
	if p, ok := ar.PendingReload(); ok {
		t.Fatalf("after b ended, pending = %+v; want it taken (a's sibling is idle now)", p)
	}
	checkHeld(t, "after reload", ar.Allocations(), "p:a:2")
}
