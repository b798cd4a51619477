package status_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/observe/status"
)

// TestReportHostIsolation: the node report carries the host's isolation, each exclusive
// pool's isolated CPUs and choice, and the pool layout's warnings, and prints them the same
// once read back from JSON (/state).
func TestReportHostIsolation(t *testing.T) {
	topo, err := topology.Synthetic("cores=4,threads=2,isolcpus=2-3,6-7,rcu_nocbs=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("poolconfig-a.yaml", []byte(`pools: {default: {cpus: "0-1,4-5"}, shared_s: {cpus: "3"}, `+
		`exclusive_e: {cpus: "2", isolatedCPUs: require}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pools.Resolve(cfg, topo)
	if err == nil || !strings.Contains(err.Error(), `pool "shared_s": cpus "3": every CPU of this shared pool is isolated`) {
		t.Fatalf("Resolve of a shared pool of isolated CPUs: %v", err)
	}
	if cfg, err = pools.Parse("poolconfig-a.yaml", []byte(`pools: {default: {cpus: "0-1,4-5,7"}, `+
		`exclusive_e: {cpus: "2", isolatedCPUs: require}}`)); err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	r := status.Build(plan.NewNode(topo, layout, plan.Policy{}), nil, nil)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back status.Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if i := back.Topology.Isolation; i == nil || i.Domain != "2-3,6-7" || i.RCUNoCBs != "1" {
		t.Errorf("JSON topology isolation = %+v, want domain 2-3,6-7 and rcu_nocbs 1", i)
	}
	var out bytes.Buffer
	if err := status.WriteText(&out, back); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nHost isolation: isolcpus domain 2-3,6-7 (not load balanced), rcu_nocbs 1\n",
		"exclusive_e: exclusive, singleThreaded, CPUs 2,6: 0 of 2 given, 0 containers, host-isolated 2,6 (isolatedCPUs: require)\n",
		`pool "default": CPU 7 is isolated from the kernel's load balancing (isolcpus=): left out of the pool`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
