package allocate

import (
	"fmt"
	"sort"
)

// Result is one exclusive allocation.
type Result struct {
	CPUs  Set // given to the container
	Idled Set // siblings kept idle under singleThreaded; held with the allocation
}

// Held is every CPU the allocation keeps from others.
func (r Result) Held() Set { return r.CPUs.Union(r.Idled) }

// InsufficientError says why a request cannot be met. The pool name is added by the caller.
type InsufficientError struct {
	Requested  int  // CPUs asked for
	Free       int  // free CPUs in the pool
	WholeCores int  // whole free cores in the pool
	NeedCores  int  // whole free cores the request needs (core units), else 0
	Unit       Unit // the pool's unit
}

func (e *InsufficientError) Error() string {
	if e.NeedCores > 0 {
		policy := "singleThreaded"
		if e.Unit == WholeCore {
			policy = "multiThreaded, a CPU is a whole core"
		}
		return fmt.Sprintf("not enough whole free cores: requested=%d CPUs needs %d whole cores (%s), whole free "+
			"cores=%d, free CPUs=%d",
			e.Requested, e.NeedCores, policy, e.WholeCores, e.Free)
	}
	return fmt.Sprintf("not enough free CPUs: requested=%d, free=%d", e.Requested, e.Free)
}

// stats counts what a scope (a set of cores) has free.
type stats struct {
	whole   int // cores whose pool threads are all free (and, multiThreaded, complete)
	free    int // free CPUs
	partial int // free CPUs on cores that are not whole
}

func (s *stats) add(o stats) { s.whole += o.whole; s.free += o.free; s.partial += o.partial }

// scan is the per-request view of the free state.
type scan struct {
	ix    *Index
	free  Set
	nfree []int // free threads per core
	whole []bool
	k, r  int  // whole cores wanted, rest CPUs wanted
	n     int  // CPUs wanted
	short bool // fewer whole cores than k: fill from partly used cores
}

func (sc *scan) coreStats(ci int) stats {
	f := sc.nfree[ci]
	if sc.whole[ci] {
		return stats{whole: 1, free: f}
	}
	return stats{free: f, partial: f}
}

func (sc *scan) groupStats(g group, in func(int) bool) stats {
	var s stats
	for _, ci := range g.cores {
		if in == nil || in(ci) {
			s.add(sc.coreStats(ci))
		}
	}
	return s
}

// fits reports whether a scope with stats s can hold the request with rule 1 kept.
func (sc *scan) fits(s stats) bool {
	switch {
	case sc.ix.unit != Thread:
		return s.whole >= sc.k
	case sc.short:
		return s.free >= sc.n
	default:
		return s.whole >= sc.k && s.partial+(s.whole-sc.k)*sc.ix.threads >= sc.r
	}
}

// Exclusive picks n units (see Unit) from the free CPUs of the pool. It does not change free; the caller
// records the Result (Held) as taken.
func (ix *Index) Exclusive(free Set, n int) (Result, error) {
	if n <= 0 {
		return Result{}, fmt.Errorf("requested %d CPUs: want at least 1", n)
	}
	sc := ix.newScan(free, n)
	total, whole := 0, 0
	for ci := range ix.cores {
		total += sc.nfree[ci]
		if sc.whole[ci] {
			whole++
		}
	}
	if ix.unit != Thread && whole < n {
		return Result{}, &InsufficientError{Requested: n, Free: total, WholeCores: whole, NeedCores: n, Unit: ix.unit}
	}
	if total < n {
		return Result{}, &InsufficientError{Requested: n, Free: total, WholeCores: whole}
	}
	sc.short = whole < sc.k
	numas := sc.chooseNUMA()
	in := make([]bool, len(ix.cores))
	for _, ni := range numas {
		for _, ci := range ix.numas[ni].cores {
			in[ci] = true
		}
	}
	order := sc.orderCores(func(ci int) bool { return in[ci] })
	return sc.take(order), nil
}

func (ix *Index) newScan(free Set, n int) *scan {
	sc := &scan{ix: ix, free: free, n: n, nfree: make([]int, len(ix.cores)), whole: make([]bool, len(ix.cores))}
	if ix.unit != Thread {
		sc.k = n
	} else {
		sc.k, sc.r = n/ix.threads, n%ix.threads
	}
	for ci, c := range ix.cores {
		f := 0
		for _, t := range c.threads {
			if free.Has(t) {
				f++
			}
		}
		sc.nfree[ci] = f
		sc.whole[ci] = f == len(c.threads) && (ix.unit != Thread || f == ix.threads)
	}
	return sc
}

// chooseNUMA returns the NUMA nodes (indexes) to allocate from: one node that fits, packed;
// else the smallest fitting combination (fewest sockets, then fewest free CPUs).
func (sc *scan) chooseNUMA() []int {
	ns := make([]stats, len(sc.ix.numas))
	best := -1
	for i, g := range sc.ix.numas {
		ns[i] = sc.groupStats(g, nil)
		if sc.fits(ns[i]) && (best < 0 || ns[i].free < ns[best].free) {
			best = i
		}
	}
	if best >= 0 {
		return []int{best}
	}
	if len(ns) > 12 { // too many combinations: the nodes that give the most first
		idx := make([]int, len(ns))
		for i := range idx {
			idx[i] = i
		}
		// What fits counts: whole cores, then free CPUs (free CPUs alone when whole cores are
		// short); ties keep the lowest IDs.
		rank := func(s stats) (int, int) {
			if sc.short {
				return s.free, s.whole
			}
			return s.whole, s.free
		}
		sort.SliceStable(idx, func(a, b int) bool {
			x1, x2 := rank(ns[idx[a]])
			y1, y2 := rank(ns[idx[b]])
			return x1 > y1 || (x1 == y1 && x2 > y2)
		})
		var s stats
		for i, ni := range idx {
			if s.add(ns[ni]); sc.fits(s) {
				return idx[:i+1]
			}
		}
		return idx
	}
	for m := 2; m <= len(ns); m++ {
		if pick := sc.bestCombo(ns, m); pick != nil {
			return pick
		}
	}
	all := make([]int, len(ns))
	for i := range all {
		all[i] = i
	}
	return all
}

// bestCombo returns the fitting combination of m NUMA nodes with the fewest sockets, then the
// fewest free CPUs, then the lowest IDs; nil if none fits.
func (sc *scan) bestCombo(ns []stats, m int) []int {
	var best []int
	bestSockets, bestFree := 0, 0
	combo := make([]int, m)
	var walk func(pos, from int)
	walk = func(pos, from int) {
		if pos == m {
			var s stats
			sockets := map[int]bool{}
			for _, ni := range combo {
				s.add(ns[ni])
				sockets[sc.ix.numas[ni].socket] = true
			}
			if !sc.fits(s) {
				return
			}
			if best == nil || len(sockets) < bestSockets || (len(sockets) == bestSockets && s.free < bestFree) {
				best = append([]int(nil), combo...)
				bestSockets, bestFree = len(sockets), s.free
			}
			return
		}
		for i := from; i <= len(ns)-(m-pos); i++ {
			combo[pos] = i
			walk(pos+1, i+1)
		}
	}
	walk(0, 0)
	return best
}

// orderCores lists the candidate cores of the scope in the order they are taken: the cores of
// one L3 group when one fits (packed), else L3 groups with the most whole cores first.
func (sc *scan) orderCores(in func(int) bool) []int {
	ls := make([]stats, len(sc.ix.l3s))
	best := -1
	for i, g := range sc.ix.l3s {
		ls[i] = sc.groupStats(g, in)
		if ls[i].free > 0 && sc.fits(ls[i]) && (best < 0 || ls[i].free < ls[best].free) {
			best = i
		}
	}
	groups := []int{best}
	if best < 0 {
		groups = groups[:0]
		for i := range sc.ix.l3s {
			if ls[i].free > 0 {
				groups = append(groups, i)
			}
		}
		sort.SliceStable(groups, func(a, b int) bool {
			x, y := ls[groups[a]], ls[groups[b]]
			if x.whole != y.whole {
				return x.whole > y.whole
			}
			return x.free > y.free
		})
	}
	var order []int
	for _, gi := range groups {
		for _, ci := range sc.ix.l3s[gi].cores {
			if in(ci) && sc.nfree[ci] > 0 {
				order = append(order, ci)
			}
		}
	}
	return order
}

// take picks the CPUs from the ordered candidate cores: whole cores first, then the rest from
// the best-fitting partly used core, then from the fullest partly used cores, and only then
// from a further whole core.
func (sc *scan) take(order []int) Result {
	var cpus, idled []int
	used := make(map[int]bool, sc.k+1)
	for _, ci := range order {
		if len(used) == sc.k {
			break
		}
		if !sc.whole[ci] {
			continue
		}
		used[ci] = true
		t := sc.ix.cores[ci].threads
		if sc.ix.unit == CoreOneThread {
			cpus, idled = append(cpus, t[0]), append(idled, t[1:]...)
		} else {
			cpus = append(cpus, t...)
		}
	}
	if rem := sc.n - len(cpus); rem > 0 && sc.ix.unit == Thread {
		var partial []int
		fit := -1
		for _, ci := range order {
			if used[ci] || sc.whole[ci] {
				continue
			}
			partial = append(partial, ci)
			if f := sc.nfree[ci]; f >= rem && (fit < 0 || f < sc.nfree[fit]) {
				fit = ci
			}
		}
		if fit >= 0 {
			partial = []int{fit}
		} else {
			sort.SliceStable(partial, func(a, b int) bool { return sc.nfree[partial[a]] > sc.nfree[partial[b]] })
		}
		for _, ci := range order { // last resort: break whole cores
			if !used[ci] && sc.whole[ci] {
				partial = append(partial, ci)
			}
		}
		for _, ci := range partial {
			for _, t := range sc.ix.cores[ci].threads {
				if rem > 0 && sc.free.Has(t) {
					cpus = append(cpus, t)
					rem--
				}
			}
		}
	}
	return Result{CPUs: NewSet(cpus...), Idled: NewSet(idled...)}
}
