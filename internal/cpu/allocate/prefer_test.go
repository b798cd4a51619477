package allocate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// TestEligible: what a container that may run only on good CPUs may be given, per unit.
func TestEligible(t *testing.T) {
	topo := mustTopo(t, dual) // core c = CPUs {c, c+8}
	good := mustSet(t, "1-3,9,12")
	for _, tc := range []struct {
		unit    Unit
		primary string
		want    string
	}{
		{unit: Thread, want: "1-3,9,12"},
		{unit: CoreOneThread, want: "1-3,9-11"},                // primaries 1-3 good; 4 not (12 is no primary)
		{unit: CoreOneThread, primary: "12", want: "1-4,9-12"}, // 12 is core 4's primary
		{unit: WholeCore, want: "1,9"},
	} {
		ix := NewIndex(topo, topo.Online(), tc.unit, mustSet(t, tc.primary))
		if got := ix.Eligible(SetOf(good)).String(); got != tc.want {
			t.Errorf("unit %d primary %q: Eligible(%s) = %s, want %s", tc.unit, tc.primary, good, got, tc.want)
		}
	}
}

// TestExclusiveFromProperties runs random arrivals and departures (fixed seeds) over pools
// whose CPUs are partly good (host-isolated), asking in turn for good CPUs only (require) and
// good CPUs first (prefer), and checks after every allocation, against counts made here:
//   - only: every unit from eligible CPUs, refused exactly when eligible ones lack the units,
//     and Exclusive's rules kept among the eligible free CPUs;
//   - first: as many eligible units as there are free (up to n), accepted whenever Exclusive
//     accepts, and Exclusive's rules kept among the eligible ones when they hold all n;
//   - both: determinism, and releasing everything restores the pool.
func TestExclusiveFromProperties(t *testing.T) {
	for _, tc := range []struct {
		spec string
		unit Unit
	}{
		{spec: "sockets=2,numa=4,cores=16,threads=2"},
		{spec: "sockets=1,numa=2,cores=8,threads=2,numbering=adjacent"},
		{spec: "sockets=2,cores=8"},
		{spec: "sockets=2,numa=4,cores=16,threads=2", unit: CoreOneThread},
		{spec: "sockets=2,numa=4,cores=16,threads=2", unit: WholeCore},
		{spec: "sockets=1,numa=2,cores=8,threads=2,offline=3,11", unit: CoreOneThread},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/unit=%d/seed=%d", tc.spec, tc.unit, seed), func(t *testing.T) {
				topo := mustTopo(t, tc.spec)
				rng := rand.New(rand.NewPCG(seed, 29))
				ix := NewIndex(topo, topo.Online(), tc.unit, cpuset.New())
				var good []int // whole cores, as isolcpus= usually names them, and a few lone threads
				for _, core := range topo.Cores() {
					switch r := rng.IntN(10); {
					case r < 4:
						good = append(good, topo.CPUsInCore(core).List()...)
					case r < 5:
						good = append(good, topo.CPUsInCore(core).List()[0])
					case r < 6:
						good = append(good, topo.CPUsInCore(core).List()[len(topo.CPUsInCore(core).List())-1])
					}
				}
				churnPreferring(t, topo, ix, SetOf(cpuset.New(good...)), rng, 500)
			})
		}
	}
}

func churnPreferring(t *testing.T, topo *topology.Topology, ix *Index, good Set, rng *rand.Rand, steps int) {
	cores := poolCores(topo, ix)
	elig := ix.Eligible(good)
	free := ix.Pool()
	var live []Result
	for step := 0; step < steps; step++ {
		if len(live) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(live))
			free = free.Union(live[i].Held())
			live = append(live[:i], live[i+1:]...)
			continue
		}
		n := []int{1, 1, 2, 2, 3, 4, 6, 8}[rng.IntN(8)]
		only := rng.IntN(2) == 0
		avail := unitsIn(cores, ix, free.Intersection(elig))
		got, err := ix.ExclusiveFrom(free, n, elig, only)
		_, plainErr := ix.Exclusive(free, n)
		switch {
		case only && (err == nil) != (avail >= n):
			t.Fatalf("step %d: require %d with %d eligible units free: err %v", step, n, avail, err)
		case !only && (err == nil) != (plainErr == nil):
			t.Fatalf("step %d: prefer %d: err %v, but Exclusive says %v", step, n, err, plainErr)
		case err != nil:
			continue
		}
		if avail >= n {
			checkRules(t, step, topo, ix, cores, free.Intersection(elig), n, got)
		}
		mine := got.CPUs.Intersection(elig)
		if ix.Unit() == WholeCore && ix.Cores(mine) != min(n, avail) || ix.Unit() != WholeCore && mine.Size() != min(n, avail) {
			t.Fatalf("step %d: asked %d (only %v) with %d eligible units free, got %s of which eligible %s",
				step, n, only, avail, got.CPUs, mine)
		}
		if !got.Held().IsSubsetOf(free) || (ix.Unit() != WholeCore && got.CPUs.Size() != n) ||
			(ix.Unit() == WholeCore && ix.Cores(got.CPUs) != n) {
			t.Fatalf("step %d: asked %d, got %s (held %s, free %s)", step, n, got.CPUs, got.Held(), free)
		}
		if again, _ := ix.ExclusiveFrom(free, n, elig, only); again.CPUs.String() != got.CPUs.String() {
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

// unitsIn counts the units free holds, from the pool's cores: CPUs (Thread), else cores with
// every pool thread free.
func unitsIn(cores []poolCore, ix *Index, free Set) int {
	if ix.Unit() == Thread {
		return free.Intersection(ix.Pool()).Size()
	}
	n := 0
	for _, pc := range cores {
		if pc.threads.IsSubsetOf(free) {
			n++
		}
	}
	return n
}
