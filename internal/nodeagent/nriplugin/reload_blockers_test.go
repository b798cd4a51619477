package nriplugin_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/podapi"
)

// TestReloadNamesEveryBlocker: a new pool config is refused naming every container that
// blocks it, whatever blocks the ones before it (a pool gone, a singleThreaded pool whose
// cores they share, a shared pool too small for the shares), and the pending config lists
// them all.
func TestReloadNamesEveryBlocker(t *testing.T) {
	noShared := strings.Replace(testPools, `  shared_s:    {cpus: "1,9"}`+"\n", "", 1)
	for _, tc := range []struct {
		name    string
		pools   string            // the new config
		reqs    []string          // by pod a, b, ...: each pod's container "app" asks this
		blocked []string          // the pods whose container blocks
		reason  map[string]string // by pod: part of its reason
	}{
		{name: "pool gone, then a move", pools: noShared,
			reqs:    []string{`{"app": {"shared_s": 500}}`, ``},
			blocked: []string{"a", "b"},
			reason:  map[string]string{"a": `pool "shared_s" is not in the pool config`, "b": "would move to 0-1,8-9"}},
		{name: "cores shared under singleThreaded, then a move",
			pools: strings.Replace(noShared, `exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: multiThreaded}`,
				`exclusive_a: {cpus: "2-3,10-11"}`, 1),
			reqs:    []string{"", `{"app": {"exclusive_a": 1}}`, `{"app": {"exclusive_a": 1}}`, ``},
			blocked: []string{"a", "b", "c", "d"},
			reason:  map[string]string{"b": "share cores with CPUs", "c": "share cores with CPUs", "d": "would move to 0-1,8-9"}},
		{name: "shares over a shrunk pool, then a move",
			pools:   strings.Replace(testPools, `shared_s:    {cpus: "1,9"}`, `shared_s:    {cpus: "1"}`, 1),
			reqs:    []string{`{"app": {"shared_s": 600}}`, `{"app": {"shared_s": 600}}`, ``},
			blocked: []string{"a", "b", "c"},
			reason:  map[string]string{"c": "would move to 0,8-9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rn node
			a := synced(t, newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, &rn)
			for i, req := range tc.reqs {
				name := string(rune('a' + i))
				var ann map[string]string
				if req != "" {
					ann = poolReq(req)
				}
				if _, err := createOn(t, a, rn.pod(name, ann), "c-"+name, "app", nil); err != nil {
					t.Fatal(err)
				}
			}
			err := a.Reload(newNode(t, testTopology, tc.pools))
			if !errors.Is(err, nriplugin.ErrPending) {
				t.Fatalf("Reload: %v; want it pending", err)
			}
			pending, ok := a.PendingReload()
			var got []string
			for _, b := range pending.Blocking {
				got = append(got, b.Pod)
				if want := tc.reason[b.Pod]; !strings.Contains(b.Reason, want) {
					t.Errorf("pod %s blocks for %q; want %q", b.Pod, b.Reason, want)
				}
			}
			if !ok || !slices.Equal(got, tc.blocked) {
				t.Errorf("blocking %v (pending %v); want %v", got, ok, tc.blocked)
			}
			for _, p := range tc.blocked {
				if !strings.Contains(err.Error(), "(ns/"+p+" app)") {
					t.Errorf("Reload's error does not name pod %s: %v", p, err)
				}
			}
		})
	}
}

// TestExactCPUsRefusalsNameTheAnnotation: exact CPUs from the device plugin in an exclusive
// pool the pool request does not name are refused, naming that pool, even after a pool it
// does name; CPUs in no exclusive pool are refused naming the annotation as the container
// has it (a per-pool annotation: the CPUs it gives).
func TestExactCPUsRefusalsNameTheAnnotation(t *testing.T) {
	var rn node
	a := synced(t, newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, &rn)
	for _, tc := range []struct {
		name     string
		pod, ctr map[string]string
		want     string
	}{
		{name: "a pool the request omits", pod: poolReq(`{"app": {"exclusive_a": 1}}`),
			ctr:  map[string]string{podapi.AnnotationExclusiveCPUs: "2,4"},
			want: `CPUs 2,4 are in pool "exclusive_b", but annotation ` + podapi.AnnotationCPUPools + ` does not ask pool "exclusive_b"`},
		{name: "no exclusive pool", ctr: map[string]string{podapi.AnnotationExclusiveCPUs: "1,0"},
			want: `annotation ` + podapi.AnnotationExclusiveCPUs + `="1,0": CPUs 0-1 are in no exclusive pool`},
		{name: "no exclusive pool, per pool", ctr: map[string]string{podapi.AnnotationExclusiveCPUs + ".exclusive_a": "1,0"},
			want: `annotation ` + podapi.AnnotationExclusiveCPUs + `.exclusive_a="0-1": CPUs 0-1 are in no exclusive pool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := rn.pod(strings.ReplaceAll(tc.name, " ", "-"), tc.pod)
			cpus, err := createOn(t, a, pod, "c-"+pod.Name, "app", tc.ctr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("created on %q, %v; want refused: %s", cpus, err, tc.want)
			}
			if _, held := allocationOf(a, pod, "app"); held {
				t.Error("the refused container holds CPUs")
			}
		})
	}
}
