package status_test

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/observe/status"
)

func TestBuild(t *testing.T) {
	r := exampleReport(t)
	pools := map[string]status.Pool{}
	var order []string
	for _, p := range r.Pools {
		pools[p.Name] = p
		order = append(order, p.Name)
	}
	if got := strings.Join(order, " "); got != "exclusive_dp exclusive_rt shared_caas default" {
		t.Errorf("pool order %s, want exclusive, shared, default", got)
	}
	for _, tc := range []struct {
		pool string
		want status.Pool
	}{
		{pool: "exclusive_dp", want: status.Pool{Name: "exclusive_dp", Type: "exclusive", HTPolicy: "multiThreaded",
			CPUs: "4-11,20-27", Allocated: "4-7,20-22", Free: "8-11,23-27", Containers: 2}},
		{pool: "exclusive_rt", want: status.Pool{Name: "exclusive_rt", Type: "exclusive", HTPolicy: "singleThreaded",
			CPUs: "12-15,28-31", Allocated: "12-13", Idled: "28-29", Free: "14-15,30-31", Containers: 1}},
		{pool: "shared_caas", want: status.Pool{Name: "shared_caas", Type: "shared", CPUs: "2-3,18-19",
			MilliCPUGranted: 800, MilliCPUCapacity: 4000, Containers: 3}},
		{pool: "default", want: status.Pool{Name: "default", Type: "default", CPUs: "0-1,16-17", Containers: 1}},
	} {
		if got := pools[tc.pool]; got != tc.want {
			t.Errorf("pool %s:\n got %+v\nwant %+v", tc.pool, got, tc.want)
		}
	}
	if len(r.Topology.CPUs) != 32 || r.Topology.ThreadsPerCore != 2 || r.Topology.Sockets != 2 {
		t.Errorf("topology %+v", r.Topology)
	}
	byName := map[string]status.Container{}
	for _, c := range r.Containers {
		byName[c.Name()] = c
	}
	if c := byName["telco/dpdk-router/fwd"]; c.CPUs != "4-5,20-21" || c.Group != "telco" || c.EPC == nil || c.EPC.LimitBytes != 64<<20 {
		t.Errorf("fwd: %+v", c)
	}
	if c := byName["shop/billing/app"]; c.CPUs != "2-3,18-19" || c.MilliCPU != 500 || c.Exclusive != "" {
		t.Errorf("app: %+v", c)
	}
	if c := byName["shop/web/nginx"]; c.CPUs != "0-1,16-17" || c.Pool != "default" {
		t.Errorf("nginx: %+v", c)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %q", r.Warnings)
	}
}

// TestBuildSections: a section entry for an unknown container adds it; an exclusive
// container with a share runs on both; a section that does not encode or decode is a warning.
func TestBuildSections(t *testing.T) {
	node := exampleNode(t)
	allocs := []allocation.Allocation{{PodUID: "u1", Namespace: "ns", Pod: "p", Container: "both", Pool: "exclusive_dp",
		Type: allocation.TypeExclusive, CPUs: cpuset.New(4, 20), SharedPool: "shared_caas", MilliCPU: 300}}
	r := status.Build(node, allocs, map[string]any{
		status.SectionEPC:       status.EPC{Containers: []status.EPCContainer{{Namespace: "ns", Pod: "q", Container: "other", LimitBytes: 1}}},
		status.SectionCoreSched: map[string]string{"containers": "not a list"},
		"broken":                math.Inf(1),
	})
	if len(r.Containers) != 2 || r.Containers[0].CPUs != "2-4,18-20" || r.Containers[1].Name() != "ns/q/other" || r.Containers[1].Pool != "" {
		t.Errorf("containers %+v", r.Containers)
	}
	if len(r.Warnings) != 2 || !strings.HasPrefix(r.Warnings[0], "extension broken: encode its state: ") ||
		!strings.HasPrefix(r.Warnings[1], "extension coresched: decode its state: ") {
		t.Errorf("warnings %q", r.Warnings)
	}
	if _, ok := r.Extensions["broken"]; ok {
		t.Error("a section that does not encode is kept")
	}
}

type source struct {
	node   *plan.Node
	allocs []allocation.Allocation
	ready  bool
}

func (s source) Snapshot() (*plan.Node, []allocation.Allocation) { return s.node, s.allocs }
func (s source) Ready() bool                                     { return s.ready }

func TestCollector(t *testing.T) {
	node := exampleNode(t)
	c := status.Collector(source{node: node, allocs: examplePlan(t, node), ready: true})
	want := `
# HELP podfence_agent_ready 1 once the container runtime has synchronised the agent (its /readyz answers 200); else 0.
# TYPE podfence_agent_ready gauge
podfence_agent_ready 1
# HELP podfence_pool_allocated_cpus Exclusive pool: CPUs given to containers.
# TYPE podfence_pool_allocated_cpus gauge
podfence_pool_allocated_cpus{pool="exclusive_dp"} 7
podfence_pool_allocated_cpus{pool="exclusive_rt"} 2
# HELP podfence_pool_idled_cpus Exclusive pool under singleThreaded: sibling threads kept idle beside given CPUs.
# TYPE podfence_pool_idled_cpus gauge
podfence_pool_idled_cpus{pool="exclusive_dp"} 0
podfence_pool_idled_cpus{pool="exclusive_rt"} 2
# HELP podfence_pool_shared_millicpu_granted Shared pool: millicpu granted to containers (the pool holds 1000 per CPU).
# TYPE podfence_pool_shared_millicpu_granted gauge
podfence_pool_shared_millicpu_granted{pool="shared_caas"} 800
# HELP podfence_containers Containers running on the pool (one with exclusive CPUs and a shared share counts in both).
# TYPE podfence_containers gauge
podfence_containers{pool="default"} 1
podfence_containers{pool="exclusive_dp"} 2
podfence_containers{pool="exclusive_rt"} 1
podfence_containers{pool="shared_caas"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "podfence_agent_ready", "podfence_pool_allocated_cpus",
		"podfence_pool_idled_cpus", "podfence_pool_shared_millicpu_granted", "podfence_containers"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "podfence_pool_cpus"); n != 4 {
		t.Errorf("podfence_pool_cpus: %d series, want one per pool", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
