package pools_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/podfence/podfence/example"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// layoutText is a config's pools as "name=cpus/policy[/isolatedCPUs] ...", sorted by name.
func layoutText(cfg *pools.Config) string {
	var out []string
	for _, p := range cfg.Pools {
		s := fmt.Sprintf("%s=%s/%s", p.Name, p.CPUs, p.HTPolicy)
		if p.Isolation.IsolatedCPUs != "" {
			s += "/" + string(p.Isolation.IsolatedCPUs)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func synthetic(t testing.TB, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestDeriveExampleNode: on the example's node the derived layout is the example's pool config.
func TestDeriveExampleNode(t *testing.T) {
	want, err := pools.Parse(example.PoolConfigName, example.PoolConfig)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pools.Derive(synthetic(t, example.Topology), "derived")
	if err != nil {
		t.Fatal(err)
	}
	if layoutText(got) != layoutText(want) || got.ExclusiveCPUs != want.ExclusiveCPUs || len(got.Warnings) > 0 {
		t.Errorf("derived %s (exclusiveCPUs %s, warnings %q),\nwant the example's %s (%s)", layoutText(got), got.ExclusiveCPUs,
			got.Warnings, layoutText(want), want.ExclusiveCPUs)
	}
}

// TestDerive: the layout derived from small and odd nodes, and what it says about them.
func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
		warnings   []string // each contained in one warning, in order
	}{
		{spec: "cores=1", want: "default=0/singleThreaded", warnings: []string{
			"this node's 1 core (1 CPU) is too few for pools shared_caas, exclusive_dp, exclusive_rt: pods that ask for them are refused"}},
		{spec: "cores=1,threads=2", want: "default=0-1/singleThreaded", warnings: []string{"this node's 1 core (2 CPUs) is too few"}},
		{spec: "cores=2", want: "default=0/singleThreaded shared_caas=1/singleThreaded", warnings: []string{
			"this node's 2 cores (2 CPUs) are too few for pools exclusive_dp, exclusive_rt: pods that ask for them are refused"}},
		{spec: "cores=3", want: "default=0/singleThreaded exclusive_dp=2/multiThreaded shared_caas=1/singleThreaded", warnings: []string{
			"this node's 3 cores (3 CPUs) are too few for pool exclusive_rt: pods that ask for it are refused"}},
		{spec: "cores=4", want: "default=0/singleThreaded exclusive_dp=2/multiThreaded exclusive_rt=3/singleThreaded shared_caas=1/singleThreaded"},
		{spec: "cores=2,threads=2", want: "default=0,2/singleThreaded shared_caas=1,3/singleThreaded", warnings: []string{
			"this node's 2 cores (4 CPUs) are too few for pools exclusive_dp, exclusive_rt"}},
		{spec: "cores=2,threads=2,numbering=adjacent", want: "default=0-1/singleThreaded shared_caas=2-3/singleThreaded",
			warnings: []string{"this node's 2 cores (4 CPUs) are too few"}},
		// 4 NUMA nodes of one core: default and shared on the first two, exclusive_rt on the last.
		{spec: "sockets=4,cores=1", want: "default=0/singleThreaded exclusive_dp=2/multiThreaded exclusive_rt=3/singleThreaded shared_caas=1/singleThreaded"},
		// 64 cores on 8 NUMA nodes: default and shared a quarter of the first node, exclusive_rt half the last.
		{spec: "sockets=2,numa=8,cores=32", want: "default=0-1/singleThreaded exclusive_dp=4-59/multiThreaded " +
			"exclusive_rt=60-63/singleThreaded shared_caas=2-3/singleThreaded"},
		// 64 cores on one: an eighth each for default and shared, a quarter for exclusive_rt.
		{spec: "cores=64", want: "default=0-7/singleThreaded exclusive_dp=16-47/multiThreaded exclusive_rt=48-63/singleThreaded " +
			"shared_caas=8-15/singleThreaded"},
		// Offline CPUs are in no pool; a core with one thread online is a core, known by that
		// thread (core 1 is CPU 5: after core 2 and 3).
		{spec: "cores=4,threads=2,offline=1,7", want: "default=0,4/singleThreaded exclusive_dp=3/multiThreaded " +
			"exclusive_rt=5/singleThreaded shared_caas=2,6/singleThreaded"},
		// CPUs the host isolated: exclusive_rt, whole cores, isolatedCPUs: prefer; the rest as on a smaller node.
		{spec: "cores=8,isolcpus=6-7", want: "default=0/singleThreaded exclusive_dp=2-5/multiThreaded " +
			"exclusive_rt=6-7/singleThreaded/prefer shared_caas=1/singleThreaded"},
		{spec: "cores=4,threads=2,nohz_full=3", want: "default=0,4/singleThreaded exclusive_dp=2,6/multiThreaded " +
			"exclusive_rt=3,7/singleThreaded/prefer shared_caas=1,5/singleThreaded"},
		{spec: "cores=3,isolcpus=managed_irq,0", want: "default=1/singleThreaded exclusive_rt=0/singleThreaded/prefer shared_caas=2/singleThreaded",
			warnings: []string{"this node's 2 cores without a CPU the host isolated are too few for pool exclusive_dp: pods that ask for it are refused"}},
		// Every core has an isolated CPU: the default pool takes the first core's others.
		{spec: "cores=2,threads=2,isolcpus=2-3", want: "default=0/singleThreaded exclusive_rt=1-3/singleThreaded/prefer", warnings: []string{
			`the host isolated a CPU of every core (isolcpus=, nohz_full=): the default pool has core 0's CPUs 0, and pool "exclusive_rt" its others`,
			"this node's 0 cores without a CPU the host isolated are too few for pools shared_caas, exclusive_dp"}},
		{spec: "cores=2,threads=2,isolcpus=0-1,nohz_full=3", want: "default=2/singleThreaded exclusive_rt=0-1,3/singleThreaded/prefer",
			warnings: []string{`the default pool has core 0's CPUs 2, and pool "exclusive_rt" its others`, "too few for pools shared_caas, exclusive_dp"}},
		{spec: "cores=2,threads=2,isolcpus=0,2-3", want: "default=1/singleThreaded exclusive_rt=0,2-3/singleThreaded/prefer",
			warnings: []string{`the default pool has core 1's CPUs 1, and pool "exclusive_rt" its others`, "too few for pools shared_caas, exclusive_dp"}},
		// Nothing is left that the host did not isolate: the default pool takes CPUs the kernel balances.
		{spec: "cores=2,isolcpus=nohz,0-1", want: "default=0/singleThreaded exclusive_rt=1/singleThreaded/prefer", warnings: []string{
			"the host isolated every CPU (isolcpus=, nohz_full=): the default pool has core 0's CPUs 0, which the kernel still balances",
			"this node's 0 cores without a CPU the host isolated are too few for pools shared_caas, exclusive_dp"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			topo := synthetic(t, tc.spec)
			cfg, err := pools.Derive(topo, "derived")
			if err != nil {
				t.Fatal(err)
			}
			if got := layoutText(cfg); got != tc.want {
				t.Errorf("layout %s\nwant   %s", got, tc.want)
			}
			checkWarnings(t, cfg.Warnings, tc.warnings)
			checkDerived(t, topo, cfg)
		})
	}
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	i := 0
	for _, w := range got {
		if i < len(want) && strings.Contains(w, want[i]) {
			i++
		}
	}
	if i < len(want) || len(got) > len(want) {
		t.Errorf("warnings %q, want (in order) %q", got, want)
	}
}

// TestDeriveNoCPU: a node whose every CPU is out of load balancing, which no kernel boots, has
// no derived layout, and the error says why and what to do.
func TestDeriveNoCPU(t *testing.T) {
	_, err := pools.Derive(synthetic(t, "cores=2,isolcpus=0-1"), "derived")
	want := "derive a pool layout: no CPU for the default pool: every online CPU is out of the kernel's load balancing " +
		"(isolcpus= domain 0-1), and pod sandboxes need CPUs it balances; leave one out of isolcpus= (the kernel keeps its " +
		"boot CPU)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v,\nwant %s", err, want)
	}
	if _, err := pools.Derive(&topology.Topology{}, "derived"); err == nil {
		t.Error("no error for a node without CPUs")
	}
}

// TestDeriveAnyNode: on nodes of 1 to 512 CPUs, SMT and not, 1 to 8 NUMA nodes, with CPUs
// offline or isolated, the derived layout resolves, holds every online CPU and is the same
// every time (checkDerived).
func TestDeriveAnyNode(t *testing.T) {
	for _, shape := range []string{
		"cores=1", "cores=2", "cores=1,threads=2", "cores=4", "cores=2,threads=2", "sockets=2,cores=2", "sockets=4,cores=1",
		"sockets=2,numa=4,cores=16,threads=2", "cores=64", "sockets=8,cores=8", "sockets=2,numa=8,cores=16,threads=2",
		"cores=16,threads=4", "sockets=2,numa=8,cores=128,threads=2", "sockets=8,cores=64", "sockets=4,numa=8,cores=32,threads=4",
		"sockets=2,numa=8,cores=256", "cores=64,threads=8",
	} {
		for _, extra := range []string{"", ",numbering=adjacent", ",offline=1", ",isolcpus=1", ",isolcpus=managed_irq,domain,1-3",
			",nohz_full=0-1", ",isolcpus=nohz,1-N", ",isolcpus=1-N"} {
			spec := shape + extra
			topo, err := topology.Synthetic(spec)
			if err != nil {
				continue // a CPU beyond a small node
			}
			t.Run(spec, func(t *testing.T) {
				cfg, err := pools.Derive(topo, "derived")
				if err != nil {
					t.Fatal(err)
				}
				checkDerived(t, topo, cfg)
				if len(topo.Cores()) >= 4 && !topo.Isolation.Any() && len(cfg.Pools) != 4 {
					t.Errorf("%d cores: layout %s, want all four pools", len(topo.Cores()), layoutText(cfg))
				}
			})
		}
	}
}

// checkDerived checks what Derive promises of cfg on topo: it resolves; every online CPU is
// in exactly one pool; the pools are the example's names; CPUs the host isolated are in
// exclusive_rt and never in the default or shared pool, while any CPU is not isolated; pools
// hold whole cores unless every core has an isolated CPU; the same inputs give the same config.
func checkDerived(t *testing.T, topo *topology.Topology, cfg *pools.Config) {
	t.Helper()
	node, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatalf("the derived layout %s does not resolve: %v", layoutText(cfg), err)
	}
	if !node.Unused.IsEmpty() {
		t.Errorf("unused CPUs %s", node.Unused)
	}
	seen := 0
	for _, p := range node.Pools {
		seen += p.CPUs.Size()
	}
	if seen != topo.NumCPUs() || !node.Pools[0].CPUs.Union(node.Default.CPUs).IsSubsetOf(topo.Online()) {
		t.Errorf("pools hold %d CPUs, the node has %d online", seen, topo.NumCPUs())
	}
	if node.Default.Name != pools.DefaultPoolName || node.Default.CPUs.IsEmpty() {
		t.Errorf("default pool %+v", node.Default)
	}
	isolated := topo.Isolation.Isolated().Intersection(topo.Online())
	whole := false // some core has no isolated CPU
	for _, core := range topo.Cores() {
		whole = whole || topo.CPUsInCore(core).Intersection(isolated).IsEmpty()
	}
	for _, p := range node.Pools {
		switch p.Name {
		case pools.DefaultPoolName, pools.DerivedShared, pools.DerivedDataPlane, pools.DerivedRealTime:
		default:
			t.Errorf("pool %q is not one the sample pods ask for", p.Name)
		}
		if p.Type != allocation.TypeExclusive && !p.CPUs.Intersection(isolated).IsEmpty() && !isolated.Equals(topo.Online()) {
			t.Errorf("%s pool %q has CPUs %s the host isolated", p.Type, p.Name, p.CPUs.Intersection(isolated))
		}
		if p.Name != pools.DerivedRealTime && p.Type == allocation.TypeExclusive && !p.HostIsolated.IsEmpty() {
			t.Errorf("pool %q has CPUs %s the host isolated", p.Name, p.HostIsolated)
		}
		for _, cpu := range p.CPUs.List() {
			if sib := topo.Siblings(cpu); whole && !sib.IsSubsetOf(p.CPUs) {
				t.Errorf("pool %q has CPU %d but not all of its core %s", p.Name, cpu, sib)
				break
			}
		}
	}
	for _, w := range node.Warnings {
		if whole && strings.Contains(w, "not alone on their cores") {
			t.Errorf("warning: %s", w)
		}
	}
	again, err := pools.Derive(topo, "derived")
	if err != nil || !reflect.DeepEqual(again, cfg) {
		t.Errorf("a second Derive gives %s (err %v), the first %s", layoutText(again), err, layoutText(cfg))
	}
}

// FuzzDerive: on any synthetic node, Derive fails only when no CPU is balanced, and what it
// derives keeps checkDerived's promises.
func FuzzDerive(f *testing.F) {
	for _, s := range []string{"cores=1", "cores=2,threads=2", "sockets=2,numa=4,cores=8,threads=2,offline=3,isolcpus=4-7",
		"cores=4,threads=2,numbering=adjacent,nohz_full=1-N", "cores=3,isolcpus=managed_irq,0-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		topo, err := topology.Synthetic(spec)
		if err != nil || topo.NumCPUs() > 1024 {
			return
		}
		cfg, err := pools.Derive(topo, "derived")
		if err != nil {
			if topo.Online().Difference(topo.Isolation.Domain).IsEmpty() {
				return
			}
			t.Fatalf("Derive: %v", err)
		}
		checkDerived(t, topo, cfg)
	})
}
