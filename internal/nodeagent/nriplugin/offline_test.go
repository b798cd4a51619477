package nriplugin_test

import (
	"testing"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

func topoWithOffline(t *testing.T, offline string) *topology.Topology {
	t.Helper()
	spec := testTopology
	if offline != "" {
		spec += ",offline=" + offline
	}
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestOfflineCPUs: CPUs taken offline are never handed out, a container on a CPU that went
// offline keeps it held, an agent started while CPUs are offline runs degraded rather than
// not at all, and CPUs back online are handed out again.
func TestOfflineCPUs(t *testing.T) {
	rt := newRuntime(t)
	dir := t.TempDir()
	first := startAgent(t, rt, newNode(t, testTopology, testPools), openStore(t, dir), nriplugin.Options{})
	a := rt.mustCreate(rt.runPod("a", poolReq(`{"c": {"exclusive_b": 2}}`)), "c", nil)
	check(t, a, want{cpus: "4,12", mems: "1", exclusive: "4,12"})

	if err := first.SetTopology(topoWithOffline(t, "6-7,14-15")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.create(rt.runPod("x", poolReq(`{"c": {"exclusive_b": 4}}`)), "c", nil); err == nil {
		t.Fatal("4 CPUs of exclusive_b granted while only 5,13 are online and free")
	}
	b := rt.mustCreate(rt.runPod("b", poolReq(`{"c": {"exclusive_b": 2}}`)), "c", nil)
	check(t, b, want{cpus: "5,13", mems: "1", exclusive: "5,13"})

	// CPU 4 of a's goes offline too; when a ends, only 12 is free again.
	if err := first.SetTopology(topoWithOffline(t, "4,6-7,14-15")); err != nil {
		t.Fatal(err)
	}
	rt.removeCtr(a.ctr)
	c := rt.mustCreate(rt.runPod("c", poolReq(`{"c": {"exclusive_b": 1}}`)), "c", nil)
	check(t, c, want{cpus: "12", mems: "1", exclusive: "12"})

	// A restart while CPUs are offline: the agent starts degraded and rebuilds what runs.
	first.stop()
	second := startAgent(t, rt, newNode(t, testTopology+",offline=4,6-7,14-15", testPools), openStore(t, dir), nriplugin.Options{})
	checkHeld(t, "after a restart with CPUs offline", second.Allocations(), "b:c:5,13", "c:c:12")
	if n := second.Node(); n.Pools.Offline["exclusive_b"].String() != "4,6-7,14-15" {
		t.Errorf("offline CPUs of exclusive_b after the restart: %v", n.Pools.Offline)
	}

	if err := second.SetTopology(topoWithOffline(t, "")); err != nil {
		t.Fatal(err)
	}
	check(t, rt.mustCreate(rt.runPod("d", poolReq(`{"c": {"exclusive_b": 4}}`)), "c", nil),
		want{cpus: "6-7,14-15", mems: "1", exclusive: "6,7,14,15"})
}

// TestRestartWithAHeldCPUOffline: an agent started with no checkpoint while CPU 4 is offline
// rebuilds a container that runs on 4,12 (exclusive_b: 2) with both CPUs, so that when CPU 4
// comes back it is still that container's; CPU 12 is not handed out meanwhile.
func TestRestartWithAHeldCPUOffline(t *testing.T) {
	var rn node
	rn.run(rn.pod("a", poolReq(`{"c": {"exclusive_b": 2}}`)), "c", "4,12", 0, 0)
	a := synced(t, newNode(t, testTopology+",offline=4", testPools), nritest.NoCheckpoint{}, &rn)
	checkHeld(t, "after the restart", a.Allocations(), "a:c:4,12")
	if _, err := createOn(t, a, rn.pod("x", nil), "c1", "c", exclusiveCPUs("12")); err == nil {
		t.Error("CPU 12, which the running container runs on, handed out")
	}
	if err := a.SetTopology(topoWithOffline(t, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := createOn(t, a, rn.pod("y", nil), "c2", "c", exclusiveCPUs("4")); err == nil {
		t.Error("CPU 4, back online, handed out while its container runs")
	}
}
