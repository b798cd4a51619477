package nriplugin_test

import (
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// TestRestartUnderANewID: the kubelet restarts a container under a new ID without the agent
// hearing that the old instance stopped, and the device plugin answers anew (CPU 6 instead of
// 4,12 on the test node): the new instance runs where it is told, the old instance's CPUs are
// free for the next container, and the checkpoint holds the new instance's CPUs.
func TestRestartUnderANewID(t *testing.T) {
	rt := newRuntime(t)
	store := openStore(t, t.TempDir())
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), store, nriplugin.Options{})
	pod := rt.runPod("p", nil)
	check(t, rt.mustCreate(pod, "app", exclusiveCPUs("4,12")), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	check(t, rt.mustCreate(pod, "app", exclusiveCPUs("6")), want{cpus: "6", mems: "1", exclusive: "6"})
	checkHeld(t, "after the restart", ar.Allocations(), "p:app:6")
	check(t, rt.mustCreate(rt.runPod("q", nil), "app", exclusiveCPUs("4,12")), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	if err := ar.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	checkHeld(t, "checkpoint", recs, "p:app:6", "q:app:4,12")
}

// TestAppRestartPlannedAnew: an app container's new instance (its StopContainer missed) is
// planned anew, unlike a sidecar's: it held 5,13 while 4,12 were taken, and gets 4,12, free
// by now.
func TestAppRestartPlannedAnew(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	first := rt.runPod("first", poolReq(`{"app": {"exclusive_b": 2}}`))
	rt.mustCreate(first, "app", nil)
	pod := rt.runPod("p", poolReq(`{"app": {"exclusive_b": 2}}`))
	check(t, rt.mustCreate(pod, "app", nil), want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	rt.removePod(first)
	check(t, rt.mustCreate(pod, "app", nil), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	checkHeld(t, "after the restart", ar.Allocations(), "p:app:4,12")
}
