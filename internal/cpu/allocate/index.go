// Package allocate chooses exclusive CPUs inside a pool, topology-aware and deterministic.
//
// A pool's Unit says what one requested CPU is: a thread (Thread), or a whole core of which
// the container gets one thread (CoreOneThread, singleThreaded) or every thread (WholeCore,
// multiThreaded in CPU-Pooler's meaning, where a pool lists physical cores).
//
// The rules, in order of priority (compare kubelet's takeByTopologyNUMAPacked):
//  1. Whole physical cores first. For Thread units a request for N CPUs on a node with T
//     threads per core takes N/T whole free cores and the N%T rest from one partly used core
//     (best fit) before it breaks another whole core. For core units it takes N whole free
//     cores; under CoreOneThread the container gets one thread of each (the core's primary
//     thread) and the siblings stay idle for it (Result.Idled).
//  2. One NUMA node when any node can hold the request with rule 1 kept; else the fewest NUMA
//     nodes (then the fewest sockets).
//  3. One L3 group inside that scope when one can hold it; else L3 groups with the most whole
//     free cores first, so the request spans as few as possible.
//  4. Packed: among candidates that fit, the one with the fewest free CPUs, so large holes stay
//     for large requests. Ties go to the lowest ID, so the same state gives the same answer.
//
// If the pool has fewer whole free cores than rule 1 needs, a Thread request still succeeds
// on partly used cores (fewest NUMA nodes first); a core request is refused.
//
// ExclusiveFrom puts one rule before these: CPUs of a given set first (the CPUs the host
// isolated, for a pool's isolatedCPUs: prefer), or only them (require).
package allocate

import (
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// Unit is what one requested CPU of an exclusive pool is, and what a container gets of it.
type Unit int

const (
	// Thread is one CPU, whole cores first (multiThreaded, a pool that lists threads).
	Thread Unit = iota
	// CoreOneThread is a whole free core: the container gets its primary thread and the
	// others stay idle for it (singleThreaded).
	CoreOneThread
	// WholeCore is a whole free core with all its pool threads (multiThreaded, a pool that
	// lists physical cores: CPU-Pooler's meaning).
	WholeCore
)

// Index is the precomputed layout of one exclusive pool: its cores, grouped by NUMA node and
// L3 group. Build it once per pool with NewIndex; it is read-only afterwards.
type Index struct {
	pool    Set
	unit    Unit
	threads int         // most pool threads on one core
	cores   []core      // sorted by core ID
	coreOf  map[int]int // pool CPU → index into cores
	numas   []group     // sorted by NUMA ID
	l3s     []group     // sorted by L3 ID
}

type core struct {
	id       int
	threads  []int // pool CPUs on this core: the primary thread, then the others ascending
	numa, l3 int   // indexes into Index.numas / Index.l3s
	socket   int
}

type group struct {
	id     int
	socket int
	cores  []int // indexes into Index.cores, ascending core ID
}

// NewIndex indexes the pool CPUs of topo for requests counted in unit. primary names the
// thread of each core a CoreOneThread container gets (the pool's devices); a core with none
// of them gives its lowest pool thread. CPUs of the pool that are not online are left out.
func NewIndex(topo *topology.Topology, pool cpuset.CPUSet, unit Unit, primary cpuset.CPUSet) *Index {
	ix := &Index{unit: unit, coreOf: map[int]int{}}
	byCore := map[int][]int{}
	for _, id := range pool.List() {
		c, ok := topo.CPUs[id]
		if !ok {
			continue
		}
		byCore[c.Core] = append(byCore[c.Core], id)
	}
	coreIDs := make([]int, 0, len(byCore))
	for id := range byCore {
		coreIDs = append(coreIDs, id)
	}
	sort.Ints(coreIDs)
	numaIdx, l3Idx := map[int]int{}, map[int]int{}
	for _, info := range topo.CPUs {
		if _, in := byCore[info.Core]; in {
			numaIdx[info.NUMA], l3Idx[info.L3] = 0, 0
		}
	}
	ix.numas = groups(numaIdx)
	ix.l3s = groups(l3Idx)
	var all []int
	for _, id := range coreIDs {
		threads := byCore[id]
		for i, t := range threads {
			if primary.Contains(t) { // first, the others keep their order
				copy(threads[1:i+1], threads[:i])
				threads[0] = t
				break
			}
		}
		first := topo.CPUs[threads[0]]
		c := core{id: id, threads: threads, numa: numaIdx[first.NUMA], l3: l3Idx[first.L3], socket: first.Socket}
		ci := len(ix.cores)
		for _, t := range threads {
			ix.coreOf[t] = ci
		}
		ix.cores = append(ix.cores, c)
		ix.numas[c.numa].cores = append(ix.numas[c.numa].cores, ci)
		ix.numas[c.numa].socket = c.socket
		ix.l3s[c.l3].cores = append(ix.l3s[c.l3].cores, ci)
		ix.threads = max(ix.threads, len(threads))
		all = append(all, threads...)
	}
	ix.pool = NewSet(all...)
	return ix
}

// groups turns a set of IDs (map keys) into sorted groups and rewrites the map to id → index.
func groups(idx map[int]int) []group {
	ids := make([]int, 0, len(idx))
	for id := range idx {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	out := make([]group, len(ids))
	for i, id := range ids {
		out[i] = group{id: id}
		idx[id] = i
	}
	return out
}

// CoreThreads returns the pool CPUs on the cores of cpus, those of cpus in the pool included.
func (ix *Index) CoreThreads(cpus Set) Set {
	var out []int
	for _, cpu := range cpus.List() {
		if ci, ok := ix.coreOf[cpu]; ok {
			out = append(out, ix.cores[ci].threads...)
		}
	}
	return NewSet(out...)
}

// Pool returns the pool's online CPUs.
func (ix *Index) Pool() Set { return ix.pool }

// ThreadsPerCore is the largest number of pool threads on one core.
func (ix *Index) ThreadsPerCore() int { return ix.threads }

// Unit is what one requested CPU of the pool is.
func (ix *Index) Unit() Unit { return ix.unit }

// SingleThreaded reports whether a container gets one thread of each core (CoreOneThread).
func (ix *Index) SingleThreaded() bool { return ix.unit == CoreOneThread }

// Cores returns the number of distinct pool cores among cpus.
func (ix *Index) Cores(cpus Set) int {
	seen := map[int]bool{}
	for _, cpu := range cpus.List() {
		if ci, ok := ix.coreOf[cpu]; ok {
			seen[ci] = true
		}
	}
	return len(seen)
}
