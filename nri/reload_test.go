package nri_test

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/nri"
)

// TestReload: a new pool config is taken only if every running container fits it as it
// runs; otherwise the agent keeps the old config and says which container would move.
func TestReload(t *testing.T) {
	rt, ar := setup(t, nri.Options{})
	pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 2}, "web": {"shared_s": 500}}`))
	app := rt.mustCreate(pod, "app", nil)
	rt.mustCreate(pod, "web", nil)
	check(t, app, want{cpus: "2,10", mems: "0", exclusive: "2,10"})

	// exclusive_a shrinks to core 3: app's CPUs 2,10 would have to move.
	shrunk := strings.Replace(testPools, `exclusive_a: {cpus: "2-3,10-11"`, `exclusive_a: {cpus: "3,11"`, 1)
	err := ar.Reload(newNode(t, testTopology, shrunk))
	if err == nil || !strings.Contains(err.Error(), "keeps the old one: running containers would have to move") ||
		!strings.Contains(err.Error(), `pool "default"`) {
		t.Fatalf("Reload(shrunk) err = %v, want a refusal naming the move", err)
	}
	check(t, rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_a": 2}}`)), "app", nil),
		want{cpus: "3,11", mems: "0", exclusive: "3,11"}) // old layout still in force

	// The shared pool goes away while web runs on it: refused too.
	noShared := strings.Replace(testPools, `  shared_s:    {cpus: "1,9"}`+"\n", "", 1)
	if err := ar.Reload(newNode(t, testTopology, noShared)); err == nil || !strings.Contains(err.Error(), `container uid-pod0001/web: pool "shared_s" is not in the pool config`) {
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
