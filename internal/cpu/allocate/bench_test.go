package allocate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// node256 is the benchmark node: 2 sockets, 4 NUMA nodes, 128 cores, 256 CPUs.
const node256 = "sockets=2,numa=4,cores=64,threads=2"

// lowestFree is the baseline: the n lowest-numbered free CPUs, blind to topology.
func lowestFree(free Set, n int) (Result, bool) {
	ids := free.List()
	if len(ids) < n {
		return Result{}, false
	}
	return Result{CPUs: NewSet(ids[:n]...)}, true
}

// fragmented returns the pool's free set after a fixed churn that leaves it about 60% used.
func fragmented(b *testing.B, ix *Index) Set {
	rng := rand.New(rand.NewPCG(7, 7))
	free := ix.Pool()
	var live []Result
	for free.Size() > ix.Pool().Size()*2/5 {
		if len(live) > 0 && rng.IntN(100) < 30 {
			i := rng.IntN(len(live))
			free = free.Union(live[i].Held())
			live = append(live[:i], live[i+1:]...)
			continue
		}
		r, err := ix.Exclusive(free, 1+rng.IntN(6))
		if err != nil {
			b.Fatal(err)
		}
		free = free.Difference(r.Held())
		live = append(live, r)
	}
	return free
}

// BenchmarkExclusive256 times one exclusive choice on a 256-CPU node whose pool is 60% used
// and fragmented. Compare with BenchmarkLowestFree256 (the topology-blind baseline).
// Under WholeCore units (CPU-Pooler's multiThreaded: a unit is a core) n is in cores.
func BenchmarkExclusive256(b *testing.B) {
	topo := mustTopo(b, node256)
	for _, unit := range []struct {
		name string
		u    Unit
	}{{"", Thread}, {"wholecores/", WholeCore}} {
		for _, n := range []int{1, 4, 16} {
			ix := NewIndex(topo, topo.Online(), unit.u, cpuset.New())
			free := fragmented(b, ix)
			b.Run(unit.name+benchName(map[Unit]string{Thread: "cpus", WholeCore: "cores"}[unit.u], n), func(b *testing.B) {
				for b.Loop() {
					if _, err := ix.Exclusive(free, n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkLowestFree256(b *testing.B) {
	topo := mustTopo(b, node256)
	ix := NewIndex(topo, topo.Online(), Thread, cpuset.New())
	free := fragmented(b, ix)
	for b.Loop() {
		lowestFree(free, 4)
	}
}

func benchName(k string, v int) string { return fmt.Sprintf("%s=%d", k, v) }

// BenchmarkChurnQuality replays one arrival/departure trace (fixed seed) on the 256-CPU node
// with podfence's allocator and with the lowest-free-ID baseline, and reports the share of
// allocations on whole cores (floor(n/2) complete cores) and on one NUMA node.
func BenchmarkChurnQuality(b *testing.B) {
	topo := mustTopo(b, node256)
	ix := NewIndex(topo, topo.Online(), Thread, cpuset.New())
	cores := poolCores(topo, ix)
	for _, alg := range []struct {
		name string
		pick func(Set, int) (Result, bool)
	}{
		{"podfence", func(free Set, n int) (Result, bool) {
			r, err := ix.Exclusive(free, n)
			return r, err == nil
		}},
		{"lowest-free-id", lowestFree},
	} {
		b.Run(alg.name, func(b *testing.B) {
			var q quality
			for b.Loop() {
				q = replay(topo, ix, cores, alg.pick)
			}
			b.ReportMetric(q.pct(q.whole), "whole-core-%")
			b.ReportMetric(q.pct(q.oneNUMA), "one-numa-%")
			b.ReportMetric(float64(q.refused), "refused")
		})
	}
}

type quality struct{ placed, whole, oneNUMA, refused int }

func (q quality) pct(x int) float64 { return 100 * float64(x) / float64(q.placed) }

// replay runs 4,000 events: sizes 1–16 CPUs, departures keep the node 60–90% used.
func replay(topo *topology.Topology, ix *Index, cores []poolCore, pick func(Set, int) (Result, bool)) quality {
	rng := rand.New(rand.NewPCG(2026, 11))
	sizes := []int{1, 2, 2, 4, 4, 4, 6, 8, 8, 16}
	free := ix.Pool()
	var live []Result
	var q quality
	for range 4000 {
		used := ix.Pool().Size() - free.Size()
		if len(live) > 0 && (used*10 > ix.Pool().Size()*9 || (used*10 > ix.Pool().Size()*6 && rng.IntN(2) == 0)) {
			i := rng.IntN(len(live))
			free = free.Union(live[i].Held())
			live = append(live[:i], live[i+1:]...)
			continue
		}
		n := sizes[rng.IntN(len(sizes))]
		r, ok := pick(free, n)
		if !ok {
			q.refused++
			continue
		}
		q.placed++
		if fullCores(cores, ix, r.CPUs) >= n/ix.ThreadsPerCore() {
			q.whole++
		}
		if topo.NUMANodesOf(r.CPUs.CPUSet()).Size() == 1 {
			q.oneNUMA++
		}
		free = free.Difference(r.Held())
		live = append(live, r)
	}
	return q
}

// BenchmarkExclusiveFrom256 times isolatedCPUs' choices on the fragmented 256-CPU pool whose
// emptiest NUMA node the host isolated: require and prefer when the isolated CPUs hold the
// request, and prefer when they do not (isolated ones, then the rest). Compare with
// BenchmarkExclusive256 (cpus=N): the same choice without isolation.
func BenchmarkExclusiveFrom256(b *testing.B) {
	topo := mustTopo(b, node256)
	ix := NewIndex(topo, topo.Online(), Thread, cpuset.New())
	free := fragmented(b, ix)
	iso := cpuset.New()
	for _, numa := range topo.NUMANodes() {
		if cpus := topo.CPUsInNUMA(numa); free.Intersection(SetOf(cpus)).Size() > free.Intersection(SetOf(iso)).Size() {
			iso = cpus
		}
	}
	elig := ix.Eligible(SetOf(iso))
	spill := ix.Units(free.Intersection(elig)) + 4 // more than the isolated CPUs free
	for _, tc := range []struct {
		name string
		n    int
		only bool
	}{{"require/cpus=4", 4, true}, {"prefer/cpus=4", 4, false}, {"prefer/spill", spill, false}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := ix.ExclusiveFrom(free, tc.n, elig, tc.only); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
