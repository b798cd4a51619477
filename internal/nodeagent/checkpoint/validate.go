package checkpoint

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Conflict is a recorded allocation that no longer fits the node. Running containers' CPUs
// never move, so the agent refuses to start on any conflict rather than re-allocating.
type Conflict struct {
	Key allocation.Key
	// File is the file that holds the record in the checkpoint directory (JournalFile).
	File string
	// Reason says what was found and what to do.
	Reason string
}

// Validate checks recorded allocations against the node's online CPUs and the configured
// pools (pool name → CPUs). It reports, per record: a pool (Pool or SharedPool) missing from
// the config; held CPUs (CPUs and Idled) that are not online; held CPUs that are now in
// another pool or in none; and CPUs also held by an earlier record. Records are taken in key
// order, and so are the conflicts. Records that hold no CPUs are checked only for their pools'
// existence. Validate does not change allocs.
func Validate(allocs []allocation.Allocation, online cpuset.CPUSet, poolCPUs map[string]cpuset.CPUSet) []Conflict {
	sorted := slices.Clone(allocs)
	slices.SortStableFunc(sorted, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	owner := poolOwners(poolCPUs)
	holder := map[int]int{} // CPU → index in sorted of the first record holding it
	var out []Conflict
	for i, a := range sorted {
		file := JournalFile
		add := func(format string, args ...any) {
			out = append(out, Conflict{Key: a.Key(), File: file, Reason: fmt.Sprintf(format, args...)})
		}
		held := a.Held()
		pool, configured := poolCPUs[a.Pool]
		for _, extra := range a.ExtraPools { // a container of several exclusive pools holds CPUs of each
			pool = pool.Union(poolCPUs[extra])
		}
		if !configured {
			cpus := ""
			if held.Size() > 0 {
				cpus = " (" + cpusNoun(held) + ")"
			}
			add("pool %q%s is not in the pool config: restore the pool config, or drain the node and delete %s",
				a.Pool, cpus, file)
		}
		if _, ok := poolCPUs[a.SharedPool]; a.SharedPool != "" && a.SharedPool != a.Pool && !ok {
			add("shared pool %q (%d millicpu) is not in the pool config: restore the pool config, or drain the node and delete %s",
				a.SharedPool, a.MilliCPU, file)
		}
		if off := held.Difference(online); off.Size() > 0 {
			add("%s of pool %q %s not online: bring %s back online, or drain the node and delete %s",
				cpusNoun(off), a.Pool, verb(off), pronoun(off), file)
		}
		if configured {
			moved := map[string][]int{} // current pool ("" for none) → CPUs
			for _, c := range held.Intersection(online).Difference(pool).UnsortedList() {
				moved[owner[c]] = append(moved[owner[c]], c)
			}
			for _, now := range slices.Sorted(maps.Keys(moved)) {
				set := cpuset.New(moved[now]...)
				where := "in no pool"
				if now != "" {
					where = fmt.Sprintf("in pool %q", now)
				}
				add("%s of pool %q %s now %s: restore the pool config, or drain the node and delete %s",
					cpusNoun(set), a.Pool, verb(set), where, file)
			}
		}
		shared := map[int][]int{} // index of the earlier holder → CPUs
		for _, c := range held.List() {
			if j, ok := holder[c]; ok {
				shared[j] = append(shared[j], c)
			} else {
				holder[c] = i
			}
		}
		for _, j := range slices.Sorted(maps.Keys(shared)) {
			set, other := cpuset.New(shared[j]...), sorted[j]
			add("%s of pool %q %s also held by container %q of pod %q (pool %q): at most one of them runs there "+
				"(a restarted agent believes the runtime); to clear both records, drain the node and delete %s",
				cpusNoun(set), a.Pool, verb(set), other.Container, other.PodUID, other.Pool, file)
		}
	}
	return out
}

// poolOwners maps each configured CPU to its pool; a CPU listed by several pools (a config
// error caught elsewhere) goes to the first name in sorted order.
func poolOwners(poolCPUs map[string]cpuset.CPUSet) map[int]string {
	owner := map[int]string{}
	for _, name := range slices.Sorted(maps.Keys(poolCPUs)) {
		for _, c := range poolCPUs[name].UnsortedList() {
			if _, ok := owner[c]; !ok {
				owner[c] = name
			}
		}
	}
	return owner
}

func cpusNoun(s cpuset.CPUSet) string {
	if s.Size() == 1 {
		return "CPU " + s.String()
	}
	return "CPUs " + s.String()
}

func verb(s cpuset.CPUSet) string {
	if s.Size() == 1 {
		return "is"
	}
	return "are"
}

func pronoun(s cpuset.CPUSet) string {
	if s.Size() == 1 {
		return "it"
	}
	return "them"
}
