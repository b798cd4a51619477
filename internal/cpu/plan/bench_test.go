package plan

import (
	"fmt"
	"testing"
)

// node256: 2 sockets, 4 NUMA nodes, 128 cores, 256 CPUs; core c = CPUs {c, c+128}.
const pools256 = `
exclusiveCPUs: threads
pools:
  default: {cpus: "0-3,128-131"}
  shared_s: {cpus: "4-11,132-139"}
  exclusive_a: {cpus: "12-127,140-255", hyperThreadingPolicy: multiThreaded}
`

// loaded256 returns the 256-CPU node holding 500 allocations: 100 exclusive containers of
// 1-3 CPUs (200 of the pool's 232 CPUs) and 400 shared containers of 30 millicpu.
func loaded256(b *testing.B) (*Node, *Ledger) {
	n := nodeOf(b, "sockets=2,numa=4,cores=64,threads=2", pools256)
	s := NewLedger(n)
	for i := range 500 {
		r := req("shared_s", "30")
		if i%5 == 0 {
			r = req("exclusive_a", fmt.Sprint([]int{1, 2, 2, 3}[i/5%4]))
		}
		if _, err := n.Allocate(s, ctr(fmt.Sprintf("c%d", i), r)); err != nil {
			b.Fatal(err)
		}
	}
	return n, s
}

// BenchmarkAllocateExclusive256 times a 4-CPU exclusive allocation (planning, recording and
// releasing it) on the loaded 256-CPU node; BenchmarkPlanDefault256 is the baseline of the
// same node planning a container that asks for no pool.
func BenchmarkAllocateExclusive256(b *testing.B) {
	n, s := loaded256(b)
	c := ctr("new", req("exclusive_a", "4"))
	b.ResetTimer()
	for b.Loop() {
		if _, err := n.Allocate(s, c); err != nil {
			b.Fatal(err)
		}
		s.Release(c.Key())
	}
}

func BenchmarkPlanDefault256(b *testing.B) {
	n, s := loaded256(b)
	c := ctr("new", nil)
	b.ResetTimer()
	for b.Loop() {
		if _, err := n.Plan(s, c); err != nil {
			b.Fatal(err)
		}
	}
}
