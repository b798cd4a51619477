package allocate

// Eligible returns the pool CPUs whose units may go to a container that may run only on good
// CPUs (the CPUs the host isolated, for isolatedCPUs): the good threads (Thread); every pool
// thread of the cores whose primary thread is good (CoreOneThread: the container runs on the
// primary alone, the others stay idle for it); every pool thread of the cores whose pool
// threads are all good (WholeCore).
func (ix *Index) Eligible(good Set) Set {
	if ix.unit == Thread {
		return ix.pool.Intersection(good)
	}
	var out []int
	for _, c := range ix.cores {
		if ix.unit == CoreOneThread && good.Has(c.threads[0]) || ix.unit == WholeCore && NewSet(c.threads...).IsSubsetOf(good) {
			out = append(out, c.threads...)
		}
	}
	return NewSet(out...)
}

// Units counts the units free holds: its CPUs (Thread), or its whole free cores.
func (ix *Index) Units(free Set) int {
	if ix.unit == Thread {
		return free.Intersection(ix.pool).Size()
	}
	sc := ix.newScan(free, 1)
	whole := 0
	for ci := range ix.cores {
		if sc.whole[ci] {
			whole++
		}
	}
	return whole
}

// ExclusiveFrom picks n units, those of eligible (an Eligible set) first: all n from the
// free CPUs of eligible when they can hold them (the rules of Exclusive kept there). Else,
// with only, it refuses with the InsufficientError of eligible's free CPUs; without, it takes
// every unit eligible has free, then the rest by Exclusive from the other free CPUs. Without
// only, it succeeds whenever Exclusive(free, n) does.
func (ix *Index) ExclusiveFrom(free Set, n int, eligible Set, only bool) (Result, error) {
	mine := free.Intersection(eligible)
	r, err := ix.Exclusive(mine, n)
	if err == nil || only || n <= 0 {
		return r, err
	}
	m := ix.Units(mine)
	if m == 0 {
		return ix.Exclusive(free, n)
	}
	first, err := ix.Exclusive(mine, m)
	if err != nil {
		return ix.Exclusive(free, n)
	}
	rest, err := ix.Exclusive(free.Difference(first.Held()), n-m)
	if err != nil { // the other free CPUs lack n-m units exactly when free lacks n
		return ix.Exclusive(free, n)
	}
	return Result{CPUs: first.CPUs.Union(rest.CPUs), Idled: first.Idled.Union(rest.Idled)}, nil
}
