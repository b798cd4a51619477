package allocate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// facts are computed from the free set independently of the allocator: what rule 1 and
// rule 2 promise for a request of n CPUs.
type facts struct {
	k, r       int  // whole cores and rest CPUs a multiThreaded request needs
	wholeFree  int  // complete cores with every thread free
	oneNUMAFit bool // some NUMA node alone can hold the request with whole cores kept
}

// poolCores maps each core of the pool to its pool threads and NUMA node.
type poolCore struct {
	threads Set
	numa    int
}

func poolCores(topo *topology.Topology, ix *Index) []poolCore {
	var out []poolCore
	for _, core := range topo.Cores() {
		threads := SetOf(topo.CPUsInCore(core)).Intersection(ix.Pool())
		if threads.Size() > 0 {
			out = append(out, poolCore{threads: threads, numa: topo.CPUs[threads.List()[0]].NUMA})
		}
	}
	return out
}

func factsFor(cores []poolCore, ix *Index, free Set, n int) facts {
	T := ix.ThreadsPerCore()
	f := facts{k: n / T, r: n % T}
	cores1 := ix.Unit() != Thread // a unit is a core
	if cores1 {
		f.k, f.r = n, 0
	}
	type numaCount struct{ whole, free int }
	per := map[int]*numaCount{}
	for _, pc := range cores {
		threads, numa := pc.threads, pc.numa
		if per[numa] == nil {
			per[numa] = &numaCount{}
		}
		nfree := threads.Intersection(free).Size()
		per[numa].free += nfree
		if nfree == threads.Size() && (cores1 || nfree == T) {
			f.wholeFree++
			per[numa].whole++
		}
	}
	for _, c := range per {
		switch {
		case cores1:
			f.oneNUMAFit = f.oneNUMAFit || c.whole >= n
		case f.wholeFree < f.k: // not enough whole cores anywhere: any n free CPUs will do
			f.oneNUMAFit = f.oneNUMAFit || c.free >= n
		default:
			f.oneNUMAFit = f.oneNUMAFit || (c.whole >= f.k && c.free-f.k*T >= f.r)
		}
	}
	return f
}

// fullCores counts the complete cores whose threads are all in held.
func fullCores(cores []poolCore, ix *Index, held Set) int {
	count := 0
	for _, pc := range cores {
		if pc.threads.Size() == ix.ThreadsPerCore() && pc.threads.IsSubsetOf(held) {
			count++
		}
	}
	return count
}

// TestExclusiveProperties runs random arrivals and departures (fixed seeds) and checks after
// every allocation: no CPU given twice, nothing outside the pool, the size asked for, whole
// cores whenever enough whole free cores exist, one NUMA node whenever one can hold it,
// determinism, and that releasing everything restores the pool.
func TestExclusiveProperties(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		single bool
		whole  bool // WholeCore units
		pool   string
	}{
		{spec: "sockets=2,numa=4,cores=16,threads=2"},
		{spec: "sockets=1,numa=4,cores=32,threads=2,l3=2"},
		{spec: "sockets=1,numa=2,cores=8,threads=2,numbering=adjacent"},
		{spec: "sockets=2,cores=8"},
		{spec: "sockets=2,numa=2,cores=8,threads=4"},
		{spec: "sockets=2,numa=4,cores=16,threads=2", single: true},
		{spec: "sockets=2,numa=4,cores=16,threads=2", whole: true},
		{spec: "sockets=2,numa=2,cores=8,threads=2", whole: true, pool: "2-7,18-23,10-13,26-27"},
		{spec: "sockets=2,numa=2,cores=8,threads=2", pool: "2-7,18-23,10-13,26-29"},
		{spec: "sockets=1,numa=2,cores=8,threads=2,offline=3,11"},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/single=%v/whole=%v/seed=%d", tc.spec, tc.single, tc.whole, seed), func(t *testing.T) {
				topo := mustTopo(t, tc.spec)
				pool := topo.Online()
				if tc.pool != "" {
					pool = mustSet(t, tc.pool)
				}
				unit := unitOf(tc.single)
				if tc.whole {
					unit = WholeCore
				}
				ix := NewIndex(topo, pool, unit, cpuset.New())
				churn(t, topo, ix, rand.New(rand.NewPCG(seed, 42)), 600)
			})
		}
	}
}

func churn(t *testing.T, topo *topology.Topology, ix *Index, rng *rand.Rand, steps int) {
	free := ix.Pool()
	cores := poolCores(topo, ix)
	var live []Result
	for step := 0; step < steps; step++ {
		if len(live) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(live))
			free = free.Union(live[i].Held())
			live = append(live[:i], live[i+1:]...)
			continue
		}
		n := []int{1, 1, 2, 2, 3, 4, 6, 8}[rng.IntN(8)]
		f := factsFor(cores, ix, free, n)
		got, err := ix.Exclusive(free, n)
		if err != nil {
			if (ix.Unit() != Thread && f.wholeFree >= n) || (ix.Unit() == Thread && free.Size() >= n) {
				t.Fatalf("step %d: refused %d CPUs with free %s: %v", step, n, free, err)
			}
			continue
		}
		checkRules(t, step, topo, ix, cores, free, n, got)
		if again, _ := ix.Exclusive(free, n); again.CPUs.String() != got.CPUs.String() {
			t.Fatalf("step %d: not deterministic: %s then %s", step, got.CPUs, again.CPUs)
		}
		free = free.Difference(got.Held())
		live = append(live, got)
	}
	for _, r := range live {
		free = free.Union(r.Held())
	}
	if free.String() != ix.Pool().String() {
		t.Fatalf("after releasing everything free = %s, want the pool %s", free, ix.Pool())
	}
}

// checkRules checks one allocation of n units from free: the size asked for, nothing held
// that was not free or is outside the pool, whole cores whenever enough whole free cores
// exist, one NUMA node whenever one can hold it.
func checkRules(t *testing.T, step int, topo *topology.Topology, ix *Index, cores []poolCore, free Set, n int, got Result) {
	t.Helper()
	f := factsFor(cores, ix, free, n)
	held := got.Held()
	switch {
	case ix.Unit() != WholeCore && got.CPUs.Size() != n:
		t.Fatalf("step %d: asked %d, got %s", step, n, got.CPUs)
	case ix.Unit() == WholeCore && (ix.Cores(got.CPUs) != n || !ix.CoreThreads(got.CPUs).IsSubsetOf(got.CPUs)):
		t.Fatalf("step %d: asked %d whole cores, got %s", step, n, got.CPUs)
	case !held.IsSubsetOf(free):
		t.Fatalf("step %d: gave %s, not all free (free %s)", step, held, free)
	case !held.IsSubsetOf(ix.Pool()):
		t.Fatalf("step %d: gave %s outside pool %s", step, held, ix.Pool())
	case ix.Unit() != WholeCore && f.wholeFree >= f.k && fullCores(cores, ix, held) < f.k:
		t.Fatalf("step %d: %d CPUs with %d whole free cores got only %d whole cores: %s (free %s)",
			step, n, f.wholeFree, fullCores(cores, ix, held), got.CPUs, free)
	case f.oneNUMAFit && topo.NUMANodesOf(held.CPUSet()).Size() != 1:
		t.Fatalf("step %d: %d CPUs fit one NUMA node but got %s on nodes %s (free %s)",
			step, n, got.CPUs, topo.NUMANodesOf(held.CPUSet()), free)
	}
}
