package nriplugin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// testPoolsST is testPools with a singleThreaded exclusive pool: core c has CPUs c and c+8,
// so exclusive_a's cores are {2,10} and {3,11}.
const testPoolsST = `
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9"}
  exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: singleThreaded}
  exclusive_b: {cpus: "4-7,12-15", hyperThreadingPolicy: multiThreaded}
`

// full lists every field of every allocation, sorted, so two states compare whole.
func full(allocs []allocation.Allocation) []string {
	var out []string
	for _, a := range allocs {
		out = append(out, fmt.Sprintf("%s/%s/%s/%s pool=%s type=%s cpus=%s idled=%s shared=%s/%d",
			a.PodUID, a.Namespace, a.Pod, a.Container, a.Pool, a.Type, a.CPUs, a.Idled, a.SharedPool, a.MilliCPU))
	}
	slices.Sort(out)
	return out
}

func overlap(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := topology.ParseCPUList(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := topology.ParseCPUList(b)
	if err != nil {
		t.Fatal(err)
	}
	return !x.Intersection(y).IsEmpty()
}

// Defect 1: the kubelet re-creates a dead sandbox under the same pod UID and removes the old
// one later; that removal must not free the CPUs of the container in the new sandbox.
func TestSandboxRecreationKeepsLiveCPUs(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	old := rt.runPod("p", poolReq(`{"app": {"exclusive_b": 4}}`))
	rt.stopCtr(rt.mustCreate(old, "app", nil).ctr) // the sandbox died, and its container with it
	renewed := rt.rerunPod(old)
	live := rt.mustCreate(renewed, "app", nil)
	rt.removePod(old) // the kubelet garbage-collects the dead sandbox
	checkHeld(t, "after the old sandbox is removed", ar.Allocations(), "p:app:"+live.cpus())
	next := rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_b": 4}}`)), "app", nil)
	if overlap(t, next.cpus(), live.cpus()) {
		t.Fatalf("CPUs handed out twice: live container runs on %s, the next one got %s", live.cpus(), next.cpus())
	}
	rt.removePod(renewed)
	checkHeld(t, "after the new sandbox is removed", ar.Allocations(), "q:app:"+next.cpus())
}

// createAll creates one container of every pool type; it returns them by name.
func createAll(t *testing.T, rt *runtime) map[string]created {
	t.Helper()
	out := map[string]created{}
	for _, c := range []struct{ name, ann string }{
		{"default", ""},
		{"shared", `{"c": {"shared_s": 300}}`},
		{"single", `{"c": {"exclusive_a": 1}}`},
		{"mixed", `{"c": {"exclusive_b": 2, "shared_s": 200}}`},
	} {
		var ann map[string]string
		if c.ann != "" {
			ann = poolReq(c.ann)
		}
		out[c.name] = rt.mustCreate(rt.runPod(c.name, ann), "c", nil)
	}
	out["given"] = rt.mustCreate(rt.runPod("given", nil), "c", exclusiveCPUs("6,14"))
	return out
}

// checkRebuilt checks that the rebuilt agent holds what the reference held, and that it
// guards every container as the first agent did.
func checkRebuilt(t *testing.T, rt *runtime, ar *agentRun, ctrs map[string]created, reference []allocation.Allocation) {
	t.Helper()
	if got, want := full(ar.Allocations()), full(reference); !slices.Equal(got, want) {
		t.Errorf("state rebuilt from the runtime:\n  %s\nwant the state before the crash:\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for name, wantCPUs := range map[string]string{"default": "0,8", "shared": "1,9"} {
		c := ctrs[name]
		rt.updateResources(c.ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15"}})
		if got := c.cpus(); got != wantCPUs {
			t.Errorf("%s container widened to %s by an update after the rebuild, want it kept on %s", name, got, wantCPUs)
		}
	}
	if _, err := rt.create(rt.runPod("sibling", nil), "c", exclusiveCPUs("10")); err == nil {
		t.Error("CPU 10, the idled sibling of the singleThreaded container's CPU 2, was handed out after the rebuild")
	}
}

// Defect 2: a state rebuilt after a lost checkpoint equals the state before, for every pool
// type, and guards the same CPUs.
func TestRebuildWithoutCheckpoint(t *testing.T) {
	for _, how := range []string{"records deleted", "directory deleted", "agent killed before writing"} {
		t.Run(how, func(t *testing.T) {
			rt := newRuntime(t)
			node := newNode(t, testTopology, testPoolsST)
			dir := t.TempDir()
			var cp nriplugin.Checkpoint = openStore(t, dir)
			stalled := make(chan struct{})
			if how == "agent killed before writing" {
				cp = slowStore{Checkpoint: cp, release: stalled}
			}
			first := startAgent(t, rt, node, cp, nriplugin.Options{})
			t.Cleanup(func() { close(stalled); _ = first.Close() }) // before t.TempDir's removal
			ctrs := createAll(t, rt)
			reference := first.Allocations()
			if how != "agent killed before writing" {
				if err := first.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			first.kill()
			var next nriplugin.Checkpoint
			switch how {
			case "records deleted":
				if err := os.Remove(filepath.Join(dir, checkpoint.JournalFile)); err != nil {
					t.Fatal(err)
				}
				next = openStore(t, dir)
			case "directory deleted":
				store := openStore(t, dir)
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				next = store
			default:
				next = openStore(t, dir)
				if recs, _ := openStore(t, dir).Load(); len(recs) != 0 {
					t.Fatalf("the stalled store wrote %v", held(recs))
				}
			}
			second := startAgent(t, rt, node, next, nriplugin.Options{})
			checkRebuilt(t, rt, second, ctrs, reference)
		})
	}
}

// Defect 3: an amount beyond what a pool could ever give is refused, naming the value as
// written, however large; none wraps into a grant.
func TestHugeAmountsRefused(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	for _, tc := range []struct{ req, want string }{
		{`{"app": {"exclusive_a": 18446744073709551618}}`, `amount "18446744073709551618" is above 10^9`},
		{`{"app": {"exclusive_a": "18446744073709551618"}}`, `amount "18446744073709551618" is above 10^9`},
		{`{"app": {"shared_s": 2305843009213694452}}`, `amount "2305843009213694452" is above 10^9`},
		{`{"app": {"exclusive_a": "1e19"}}`, `amount "1e19" is above 10^9`},
		{`{"app": {"shared_s": "1e19"}}`, `amount "1e19" is above 10^9`},
		{`{"app": {"exclusive_a": 5}}`, `(ExclusiveTooLarge): asks podfence.io/exclusive_a=5, but exclusive pool "exclusive_a" has 4 CPUs`},
		{`{"app": {"exclusive_a": "999999999"}}`, `(ExclusiveTooLarge): asks podfence.io/exclusive_a=999999999`},
		{`{"app": {"shared_s": "999999999"}}`,
			`(SharedTooLarge): asks 999999999 millicpu of shared pool "shared_s", which has 2 CPUs (2000 millicpu)`},
		{`{"app": {"shared_s": 2001}}`, `(SharedTooLarge): asks 2001 millicpu`},
	} {
		_, err := rt.create(rt.runPod("p", poolReq(tc.req)), "app", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a refusal containing %q", tc.req, err, tc.want)
		}
	}
	checkHeld(t, "after the refusals", ar.Allocations())
}

// Defect 4: the kernel refuses a CFS quota under 1000 µs; a small share gets the minimum, as
// the kubelet gives small CPU limits.
func TestSharedQuotaKernelMinimum(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	for _, tc := range []struct {
		milli int
		quota int64
	}{{1, 1000}, {5, 1000}, {9, 1000}, {10, 1000}, {11, 1100}, {500, 50000}} {
		c := rt.mustCreate(rt.runPod("p", poolReq(fmt.Sprintf(`{"app": {"shared_s": %d}}`, tc.milli))), "app", nil)
		if c.quota() != tc.quota || c.period() != 100000 {
			t.Errorf("%d millicpu: quota %d/%d µs, want %d/100000", tc.milli, c.quota(), c.period(), tc.quota)
		}
		rt.removeCtr(c.ctr)
	}
}

// Defect 6: a broken podfence.io/cpu-pools entry refuses the pod, and every refusal names
// the offending container, pool and value: the container's own entry when it is broken,
// else the first broken one by name, the same every time.
func TestCPUPoolsRefusalNamesOffendingEntry(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	pod := rt.runPod("p", poolReq(`{"a": {"exclusive_a": 1}, "b": {"shared_s": "x"}, "c": {"exclusive_b": -2}, "d": {}}`))
	for _, tc := range []struct{ ctr, want string }{
		{"a", `container "b" pool "shared_s": amount "x" is not a quantity`},
		{"b", `container "b" pool "shared_s": amount "x" is not a quantity`},
		{"c", `container "c" pool "exclusive_b": amount "-2" must be above 0`},
		{"d", `container "b" pool "shared_s": amount "x" is not a quantity`},
	} {
		for range 20 { // map order must not decide which entry is named
			_, err := rt.create(pod, tc.ctr, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("container %s: got %v, want an error naming %s", tc.ctr, err, tc.want)
			}
		}
	}
}
