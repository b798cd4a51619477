package allocate

import (
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func mustTopo(t testing.TB, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func mustSet(t testing.TB, list string) cpuset.CPUSet {
	t.Helper()
	s, err := topology.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Topologies used below. "dual": cores 0-7, core c = CPUs {c, c+8}; NUMA 0 = cores 0-3.
// "l3": one NUMA node, cores 0-7, core c = {c, c+8}, L3 groups = cores 0-3 and 4-7.
const (
	dual     = "sockets=2,numa=2,cores=4,threads=2"
	l3spec   = "sockets=1,cores=8,threads=2,l3=2"
	adjacent = "sockets=1,cores=4,threads=2,numbering=adjacent"
	noSMT    = "sockets=1,cores=4"
)

// unitOf is the unit of a singleThreaded (true) or thread-counting multiThreaded pool.
func unitOf(single bool) Unit {
	if single {
		return CoreOneThread
	}
	return Thread
}

func TestExclusive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		topo    string
		pool    string // "" = every CPU
		single  bool
		whole   bool   // WholeCore units (overrides single)
		primary string // the primary threads
		taken   string
		n       int
		cpus    string
		idled   string
		err     string
	}{
		{name: "two CPUs take one whole core", topo: dual, n: 2, cpus: "0,8"},
		{name: "odd request breaks one more core when no core is partly used", topo: dual, n: 3, cpus: "0-1,8"},
		{name: "the rest comes from a partly used core", topo: dual, taken: "0", n: 3, cpus: "1,8-9"},
		{name: "one CPU fills a partly used core", topo: dual, taken: "0-1", n: 1, cpus: "8"},
		{name: "packs into the fuller NUMA node", topo: dual, taken: "4-5,12-13", n: 2, cpus: "6,14"},
		{name: "ties go to the lowest NUMA node", topo: dual, n: 4, cpus: "0-1,8-9"},
		{name: "spans the fewest NUMA nodes", topo: dual, n: 10, cpus: "0-4,8-12"},
		{name: "whole cores before a NUMA node of broken cores", topo: dual, taken: "0-3,4-5,12-13", n: 4, cpus: "6-7,14-15"},
		{name: "without enough whole cores, fewest NUMA nodes", topo: dual, taken: "0-3,4-6,12-14", n: 4, cpus: "8-11"},
		{name: "singleThreaded idles the siblings", topo: dual, single: true, n: 2, cpus: "0-1", idled: "8-9"},
		{name: "singleThreaded packs into the fuller NUMA node", topo: dual, single: true, taken: "0,4-6", n: 1, cpus: "7", idled: "15"},
		{name: "singleThreaded refuses broken cores", topo: dual, single: true, taken: "0-3", n: 5,
			err: "not enough whole free cores: requested=5 CPUs needs 5 whole cores (singleThreaded), whole free cores=4, free CPUs=12"},
		{name: "not enough free CPUs", topo: dual, n: 17, err: "not enough free CPUs: requested=17, free=16"},
		{name: "not enough free CPUs in a used pool", topo: dual, taken: "0-9", n: 7, err: "not enough free CPUs: requested=7, free=6"},
		{name: "zero CPUs", topo: dual, n: 0, err: "requested 0 CPUs: want at least 1"},
		{name: "one L3 group, the fuller one", topo: l3spec, taken: "0,8", n: 4, cpus: "1-2,9-10"},
		{name: "the L3 group that holds it whole", topo: l3spec, taken: "0,8", n: 8, cpus: "4-7,12-15"},
		{name: "only the pool's CPUs", topo: dual, pool: "4-7,12-15", n: 2, cpus: "4,12"},
		{name: "adjacent siblings", topo: adjacent, n: 2, cpus: "0-1"},
		{name: "no SMT", topo: noSMT, taken: "1", n: 2, cpus: "0,2"},
		{name: "whole cores: two units are two cores, every thread", topo: dual, whole: true, n: 2, cpus: "0-1,8-9"},
		{name: "whole cores pack into the fuller NUMA node", topo: dual, whole: true, taken: "0,4-6", n: 1, cpus: "7,15"},
		{name: "whole cores refuse broken cores", topo: dual, whole: true, taken: "0-3", n: 5,
			err: "not enough whole free cores: requested=5 CPUs needs 5 whole cores (multiThreaded, a CPU is a whole core), whole " +
				"free cores=4, free CPUs=12"},
		{name: "whole cores of a pool short of siblings", topo: dual, whole: true, pool: "0-3,8-9", n: 3, cpus: "0-2,8-9"},
		{name: "whole cores without SMT are CPUs", topo: noSMT, whole: true, taken: "1", n: 2, cpus: "0,2"},
		{name: "singleThreaded gives the primary thread", topo: dual, single: true, primary: "8-9,2", n: 3, cpus: "2,8-9",
			idled: "0-1,10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustTopo(t, tc.topo)
			pool := topo.Online()
			if tc.pool != "" {
				pool = mustSet(t, tc.pool)
			}
			unit := unitOf(tc.single)
			if tc.whole {
				unit = WholeCore
			}
			ix := NewIndex(topo, pool, unit, mustSet(t, tc.primary))
			free := ix.Pool().Difference(SetOf(mustSet(t, tc.taken)))
			got, err := ix.Exclusive(free, tc.n)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.CPUs.String() != tc.cpus || got.Idled.String() != tc.idled {
				t.Errorf("got CPUs %q idled %q, want %q idled %q", got.CPUs, got.Idled, tc.cpus, tc.idled)
			}
			again, _ := ix.Exclusive(free, tc.n)
			if again.CPUs.String() != got.CPUs.String() {
				t.Errorf("not deterministic: %s then %s", got.CPUs, again.CPUs)
			}
		})
	}
}

func TestSet(t *testing.T) {
	a, b := NewSet(0, 5, 64, 130), NewSet(5, 130, 200)
	for _, tc := range []struct{ name, got, want string }{
		{"union", a.Union(b).String(), "0,5,64,130,200"},
		{"difference", a.Difference(b).String(), "0,64"},
		{"intersection", a.Intersection(b).String(), "5,130"},
		{"zero value", Set{}.String(), ""},
		{"round trip", SetOf(mustSet(t, "0-3,100-101")).String(), "0-3,100-101"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if a.Size() != 4 || !a.Has(64) || a.Has(63) || a.Has(-1) || a.Has(9999) {
		t.Errorf("size/has wrong on %s", a)
	}
	if !NewSet(5).IsSubsetOf(a) || b.IsSubsetOf(a) || !(Set{}).IsSubsetOf(a) {
		t.Error("IsSubsetOf wrong")
	}
}
