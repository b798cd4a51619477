package nriplugin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// peerPools is a CPU-Pooler config (its meaning: exclusive pools list physical cores; core c
// has CPUs c and c+8): exclusive_m owns cores 2-5 with every thread, exclusive_st cores 6-7.
const peerPools = `
resourceBaseName: nokia.k8s.io
pools:
  default:      {cpus: "0,8"}
  shared_s:     {cpus: "1,9"}
  exclusive_m:  {cpus: "2-5", hyperThreadingPolicy: multiThreaded}
  exclusive_st: {cpus: "6-7"}
`

// peerNode is peerPools on the test node with the default policy (CPU-Pooler's CFS quotas).
func peerNode(t *testing.T) *plan.Node {
	t.Helper()
	topo, err := topology.Synthetic(testTopology)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("peer pools", []byte(peerPools))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, layout, plan.Policy{})
}

// TestCPUPoolerContainers: what a CPU-Pooler workload's container gets from the agent, with
// the device plugin's annotations as it writes them: a multiThreaded core whole, two
// exclusive pools in one container (by the per-pool annotations, or, where the kubelet kept
// one plugin's generic annotation only, the allocator's choice for the other pool),
// CPU-Pooler's environment and CFS quotas.
func TestCPUPoolerContainers(t *testing.T) {
	for _, tc := range []struct {
		name           string
		podAnn, ctrAnn map[string]string
		want           want
		pools, ctrName string // CPU_POOLS, CONTAINER_NAME
	}{
		{name: "multiThreaded: the device's whole core", ctrAnn: map[string]string{"podfence.io/exclusive-cpus.exclusive_m": "2,10"},
			want:  want{cpus: "2,10", mems: "0", quota: 110000, period: 100000, exclusive: "2,10"},
			pools: "exclusive", ctrName: "app"},
		{name: "two exclusive pools, per-pool annotations", podAnn: poolReq(`{"app": {"exclusive_m": 1, "exclusive_st": 1}}`),
			ctrAnn: map[string]string{"podfence.io/exclusive-cpus.exclusive_m": "3,11", "podfence.io/exclusive-cpus.exclusive_st": "7",
				"podfence.io/exclusive-cpus": "7"}, // the kubelet kept exclusive_st's generic annotation
			want:  want{cpus: "3,7,11", mems: "0-1", quota: 210000, period: 100000, exclusive: "3,7,11"},
			pools: "exclusive", ctrName: "app"},
		{name: "two exclusive pools, one plugin's generic annotation: the allocator chooses the other",
			podAnn: poolReq(`{"app": {"exclusive_m": 1, "exclusive_st": 1}}`), ctrAnn: exclusiveCPUs("6"),
			want:  want{cpus: "2,6,10", mems: "0-1", quota: 210000, period: 100000, exclusive: "2,6,10"},
			pools: "exclusive", ctrName: "app"},
		{name: "exclusive and shared: the whole shared pool in the quota", podAnn: poolReq(`{"app": {"exclusive_st": 1, "shared_s": 200}}`),
			want:  want{cpus: "1,6,9", mems: "0-1", quota: 300000, period: 100000, exclusive: "6", shared: "1,9"},
			pools: "exclusive&shared", ctrName: "app"},
		{name: "shared, named by the pinning annotation", podAnn: map[string]string{"podfence.io/cpu-pools": `{"app": {"shared_s": 160}}`,
			"nokia.k8s.io/cpus": `[{"container": "app", "processes": [{"process": "/bin/sh", "args": [], "pool": "shared_s", "cpus": 160}]}]`},
			want:  want{cpus: "1,9", mems: "0", quota: 16000, period: 100000, shared: "1,9"},
			pools: "shared", ctrName: "app"},
		{name: "default pool: nothing set", want: want{cpus: "0,8", mems: "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t)
			startAgent(t, rt, peerNode(t), openStore(t, t.TempDir()), nriplugin.Options{})
			c := rt.mustCreate(rt.runPod("p", tc.podAnn), "app", tc.ctrAnn)
			check(t, c, tc.want)
			if c.env("CPU_POOLS") != tc.pools || c.env("CONTAINER_NAME") != tc.ctrName {
				t.Errorf("CPU_POOLS=%q CONTAINER_NAME=%q, want %q, %q", c.env("CPU_POOLS"), c.env("CONTAINER_NAME"), tc.pools, tc.ctrName)
			}
		})
	}
}

// TestCPUPoolerRebuildWithoutCheckpoint: an agent restarted without its records rebuilds, from
// the runtime alone, the allocations of CPU-Pooler workloads: a multiThreaded container's
// whole cores (a request of cores, not CPUs), one of two exclusive pools with a share, and
// a singleThreaded one with its idled siblings.
func TestCPUPoolerRebuildWithoutCheckpoint(t *testing.T) {
	rt := newRuntime(t)
	node := peerNode(t)
	first := startAgent(t, rt, node, nritest.NoCheckpoint{}, nriplugin.Options{})
	rt.mustCreate(rt.runPod("whole", poolReq(`{"app": {"exclusive_m": 2}}`)), "app",
		map[string]string{"podfence.io/exclusive-cpus.exclusive_m": "2-3,10-11"})
	rt.mustCreate(rt.runPod("two", poolReq(`{"app": {"exclusive_m": 1, "exclusive_st": 1, "shared_s": 300}}`)), "app", nil)
	rt.mustCreate(rt.runPod("single", poolReq(`{"app": {"exclusive_st": 1}}`)), "app", nil)
	reference := first.Allocations()
	first.kill()
	second := startAgent(t, rt, node, nritest.NoCheckpoint{}, nriplugin.Options{})
	withExtra := func(allocs []allocation.Allocation) []string {
		out := full(allocs)
		for _, a := range allocs {
			if len(a.ExtraPools) > 0 {
				out = append(out, a.Pod+" extra pools "+strings.Join(a.ExtraPools, ","))
			}
		}
		return out
	}
	if got, want := withExtra(second.Allocations()), withExtra(reference); !slices.Equal(got, want) {
		t.Errorf("state rebuilt from the runtime:\n  %s\nwant the state before:\n  %s", strings.Join(got, "\n  "),
			strings.Join(want, "\n  "))
	}
}
