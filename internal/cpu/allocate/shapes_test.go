package allocate

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// Machine shapes for TestExclusiveShapes (apart numbering: thread t of core c is CPU t*cores+c).
const (
	// numa4: 2 sockets, NUMA nodes 0-1 on socket 0; node i = cores 4i..4i+3; core c = {c, c+16}.
	numa4 = "sockets=2,numa=4,cores=8,threads=2"
	// numa8: 2 sockets, NUMA nodes 0-3 on socket 0; node i = cores 4i..4i+3; core c = {c, c+32}.
	numa8 = "sockets=2,numa=8,cores=16,threads=2"
	// numa12 / numa13: one socket, node i = cores 4i..4i+3; core c = {c, c+48} / {c, c+52}.
	numa12 = "sockets=1,numa=12,cores=48,threads=2"
	numa13 = "sockets=1,numa=13,cores=52,threads=2"
	// l3x4: one NUMA node, 4 L3 groups of 4 cores (cores 0-3, 4-7, ...); core c = {c, c+16}.
	l3x4 = "sockets=1,cores=16,threads=2,l3=4"
	// smt4: one node, 4 cores of 4 threads; core c = {c, c+4, c+8, c+12}.
	smt4 = "sockets=1,cores=4,threads=4"
	// offline1: NUMA 0 = cores 0-1, NUMA 1 = cores 2-3; core c = {c, c+4}; CPU 1 offline, so core 1 is {5}.
	offline1 = "sockets=1,numa=2,cores=4,threads=2,offline=1"
)

// numa13OneCoreLeft takes every core of NUMA nodes 3-12 of numa13 but the first.
var numa13OneCoreLeft = func() string {
	var parts []string
	for node := 3; node < 13; node++ {
		for _, base := range []int{0, 52} {
			parts = append(parts, fmt.Sprintf("%d-%d", base+4*node+1, base+4*node+3))
		}
	}
	return strings.Join(parts, ",")
}()

// TestExclusiveShapes pins which CPUs an exclusive request gets on machine shapes beyond two
// NUMA nodes: the smallest set of NUMA nodes (fewest sockets, then fewest free CPUs, then
// lowest IDs), the largest-first choice above 12 nodes, L3 order when no L3 group holds the
// request, best-fit rests on SMT4 cores, and cores with an offline thread.
func TestExclusiveShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		topo   string
		single bool
		taken  string
		n      int
		cpus   string
		idled  string
	}{
		// Three of four NUMA nodes: every combination spans both sockets.
		{name: "4 NUMA: 3 nodes, ties go to the lowest nodes", topo: numa4, n: 18, cpus: "0-8,16-24"},
		{name: "4 NUMA: 3 nodes, the combination with the fewest free CPUs", topo: numa4, taken: "12,28", n: 18,
			cpus: "0-7,13,16-23,29"},
		// Eight NUMA nodes: 9 whole cores need 3 nodes.
		{name: "8 NUMA: 3 nodes, the fullest combination on one socket", topo: numa8, taken: "52,56,60", n: 18,
			cpus: "21-23,25-27,29-31,53-55,57-59,61-63"},
		{name: "8 NUMA: one socket before fewer free CPUs on two", topo: numa8, taken: "12-15,17-31,41-47,49-63", n: 18,
			cpus: "0-8,32-40"},
		// Exactly 12 NUMA nodes are still searched exhaustively: the two fullest nodes that fit.
		{name: "12 NUMA: the smallest fitting pair", topo: numa12, taken: "0,48,4-5,52-53", n: 10, cpus: "1-3,6-7,49-51,54-55"},
		// Above 12 NUMA nodes: nodes 0-2 are free, nodes 3-12 have one whole core each. Two of
		// nodes 0-2 are the fewest nodes; all three pairs tie, so the lowest.
		{name: "13 NUMA: the fewest nodes, ties to the lowest", topo: numa13, taken: numa13OneCoreLeft, n: 14, cpus: "0-6,52-58"},
		{name: "13 NUMA: one node that fits is still packed", topo: numa13, taken: "0,52", n: 6, cpus: "1-3,53-55"},
		// Nodes 0 and 1 have more free CPUs (5) but one whole core each; nodes 2 and 3 have two.
		{name: "13 NUMA: nodes ranked by whole cores, not free CPUs", topo: numa13,
			taken: "10-11,14-51,53-55,57-59,62-63,66-103", n: 8, cpus: "8-9,12-13,60-61,64-65"},
		// One NUMA node, no L3 group holds 5 whole cores: most whole cores first, then most free CPUs.
		{name: "L3 order: most whole cores, then most free CPUs", topo: l3x4, taken: "4,18-20,31", n: 10, cpus: "8-12,24-28"},
		{name: "L3 order: the rest from the first best-fitting partly used core", topo: l3x4, taken: "4,18-20,31", n: 11,
			cpus: "8-12,15,24-28"},
		// SMT4.
		{name: "SMT4: rest from the partly used core that fits best", topo: smt4, taken: "1-2,6", n: 2, cpus: "10,14"},
		{name: "SMT4: whole core then best-fitting rest", topo: smt4, taken: "1-2,6", n: 6, cpus: "0,4,8,10,12,14"},
		{name: "SMT4: best fit on the lowest core, not the fullest", topo: smt4, taken: "0-1,4", n: 2, cpus: "8,12"},
		{name: "SMT4: a rest that fills a core exactly", topo: smt4, taken: "1-2,6", n: 7, cpus: "0,4-5,8-9,12-13"},
		{name: "SMT4: no core fits the rest, fullest partly used cores first", topo: smt4, taken: "1-3,6-7,11", n: 8,
			cpus: "0,4-5,8-10,12-13"},
		{name: "SMT4: equally full partly used cores in core order", topo: smt4, taken: "0-2,4-6,8,12", n: 7,
			cpus: "3,7,9-11,13,15"},
		{name: "SMT4: two CPUs break a whole core", topo: smt4, n: 2, cpus: "0,4"},
		// Offline CPUs.
		{name: "offline: a core missing a thread is not whole", topo: offline1, n: 4, cpus: "2-3,6-7"},
		{name: "offline: the lone thread is the rest", topo: offline1, n: 3, cpus: "0,4-5"},
		{name: "offline: singleThreaded gives the lone thread, nothing to idle", topo: offline1, single: true, n: 2,
			cpus: "0,5", idled: "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := mustTopo(t, tc.topo)
			ix := NewIndex(topo, topo.Online(), unitOf(tc.single), cpuset.New())
			checkExclusive(t, ix, tc.taken, tc.n, tc.cpus, tc.idled)
		})
	}
}

func checkExclusive(t *testing.T, ix *Index, taken string, n int, cpus, idled string) {
	t.Helper()
	free := ix.Pool().Difference(SetOf(mustSet(t, taken)))
	got, err := ix.Exclusive(free, n)
	if err != nil {
		t.Fatal(err)
	}
	if got.CPUs.String() != cpus || got.Idled.String() != idled {
		t.Errorf("%d CPUs with %s taken: got CPUs %q idled %q, want %q idled %q", n, taken, got.CPUs, got.Idled, cpus, idled)
	}
}

// spanningL3 is "sockets=1,numa=2,cores=8,threads=2" (NUMA 0 = cores 0-3, NUMA 1 = cores 4-7,
// core c = {c, c+8}) with L3 groups cores 0-2, 3-5 (spanning both NUMA nodes) and 6-7.
func spanningL3(t *testing.T) *topology.Topology {
	topo := mustTopo(t, "sockets=1,numa=2,cores=8,threads=2")
	for id, cpu := range topo.CPUs {
		switch core := cpu.Core; {
		case core <= 2:
			cpu.L3 = 0
		case core <= 5:
			cpu.L3 = 3
		default:
			cpu.L3 = 6
		}
		topo.CPUs[id] = cpu
	}
	return topo
}

// TestExclusiveL3SpanningNUMA: an L3 group that spans NUMA nodes is judged by its cores in the
// chosen NUMA node only, and only those cores are taken.
func TestExclusiveL3SpanningNUMA(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken string
		n     int
		cpus  string
	}{
		// NUMA 0 is fuller (core 0 partly used). In it the spanning group has only core 3:
		// it holds one whole core with the fewest free CPUs.
		{name: "the spanning group's part in the node fits best", taken: "8", n: 2, cpus: "3,11"},
		// Neither group's part holds 3 whole cores: cores 1-2, then core 3, all in NUMA 0.
		{name: "no group's part fits: cores of the node only", taken: "8", n: 6, cpus: "1-3,9-11"},
		// NUMA 1 is fuller; its part of the spanning group is cores 4-5.
		{name: "the part in the other node", taken: "0-3", n: 4, cpus: "4-5,12-13"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := spanningL3(t)
			checkExclusive(t, NewIndex(topo, topo.Online(), Thread, cpuset.New()), tc.taken, tc.n, tc.cpus, "")
		})
	}
}

// TestSetHasPastLastWord: Has is false, without panicking, for CPUs just past the set's last
// 64-CPU word and for far larger ones.
func TestSetHasPastLastWord(t *testing.T) {
	s := NewSet(0, 63)
	for _, cpu := range []int{64, 127, 128, 1 << 20} {
		if s.Has(cpu) {
			t.Errorf("%s has %d", s, cpu)
		}
	}
	if !s.Has(63) || !s.Has(0) || s.Size() != 2 {
		t.Errorf("NewSet(0, 63) = %s", s)
	}
}
