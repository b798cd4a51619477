package status_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/podfence/podfence/example"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/manifest"
	"github.com/podfence/podfence/internal/observe/status"
)

// exampleNode is `podfence plan`'s embedded example: 2 sockets × 8 cores × 2 threads, core c
// with threads c and c+16, pools default 0-1,16-17, shared_caas 2-3,18-19, exclusive_dp
// 4-11,20-27 (multiThreaded) and exclusive_rt 12-15,28-31 (singleThreaded).
func exampleNode(t *testing.T) *plan.Node {
	t.Helper()
	topo, err := topology.Synthetic(example.Topology)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse(example.PoolConfigName, example.PoolConfig)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, layout, plan.Policy{})
}

// examplePlan places the example pods and returns what they hold.
func examplePlan(t *testing.T, node *plan.Node) []allocation.Allocation {
	t.Helper()
	pods, err := manifest.ReadPods(bytes.NewReader(example.Pods), "example pods")
	if err != nil {
		t.Fatal(err)
	}
	st := plan.NewLedger(node)
	node.PlanPods(st, pods)
	return st.Allocations()
}

// exampleReport is the example as the agent would report it, with an EPC section.
func exampleReport(t *testing.T) status.Report {
	t.Helper()
	node := exampleNode(t)
	used := uint64(12 << 20)
	r := status.Build(node, examplePlan(t, node), map[string]any{
		status.SectionEPC: status.EPC{Supported: true, Policy: "strict", CapacityBytes: 1 << 30, Containers: []status.EPCContainer{
			{Namespace: "telco", Pod: "dpdk-router", Container: "fwd", LimitBytes: 64 << 20, InForce: true, UsageBytes: &used},
		}},
		status.SectionCoreSched: status.CoreSched{Containers: []status.CoreSchedContainer{
			{Namespace: "telco", Pod: "dpdk-router", Container: "fwd", Group: "telco", State: "ok"},
			{Namespace: "telco", Pod: "rt-control", Container: "loop", Group: "rt", State: "unsupported"},
		}},
		"sandbox": map[string]int{"vms": 0},
	})
	r.Node, r.Source, r.Ready = "node-a", "agent", true
	r.Time = time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	r.Kernel = status.Kernel{
		SMT:              status.Feature{Available: true, Detail: "2 threads per core, smt/control on"},
		CoreScheduling:   status.Feature{Detail: "kernel without core scheduling (CONFIG_SCHED_CORE)"},
		Cgroup:           status.Cgroup{Version: "v2", Driver: "systemd"},
		SGXEPC:           status.Feature{Available: true},
		EPCCapacityBytes: 1 << 30,
	}
	return r
}
