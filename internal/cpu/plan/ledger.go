package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocate"
	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Ledger is what the node has handed out: one allocation per container, the free CPUs of each
// exclusive pool and the millicpu granted in the shared pool. Invariant: an exclusive pool's
// free set is its CPUs minus every allocation's Held CPUs in it. Not safe for concurrent use.
type Ledger struct {
	node   *Node
	allocs map[allocation.Key]allocation.Allocation
	free   map[string]allocate.Set
	shared int64
}

// NewLedger returns an empty ledger for node.
func NewLedger(node *Node) *Ledger {
	s := &Ledger{node: node, allocs: map[allocation.Key]allocation.Allocation{}, free: map[string]allocate.Set{}}
	for name, ix := range node.index {
		s.free[name] = ix.Pool()
	}
	return s
}

// Restore adds recorded allocations (from a checkpoint or a runtime resync), checking each
// against the node: its pools must exist with the recorded type, and its CPUs must be in its
// pool and held by no other record.
func (s *Ledger) Restore(allocs []allocation.Allocation) error {
	for _, a := range allocs {
		if err := s.Add(a); err != nil {
			return fmt.Errorf("restore allocation of %s: %w", a.Key(), err)
		}
	}
	return nil
}

// Add records an allocation. It replaces nothing: the key must be new. Every field is
// checked against the node and the other allocations (a record read back from disk may be
// damaged): no CPU or millicpu is ever counted twice.
func (s *Ledger) Add(a allocation.Allocation) error {
	k := a.Key()
	if _, dup := s.allocs[k]; dup {
		return fmt.Errorf("container %s already holds an allocation", k)
	}
	if err := s.node.checkFields(a); err != nil {
		return err
	}
	if a.Type == allocation.TypeExclusive {
		held := allocate.SetOf(a.Held())
		within := allocate.Set{} // the pools' CPUs, and those gone offline since the allocation (still held)
		take := map[string]allocate.Set{}
		for _, name := range a.ExclusivePools() {
			free, ok := s.free[name]
			if !ok {
				return fmt.Errorf("pool %q is not an exclusive pool of this node (exclusive pools: %v)", name,
					s.node.poolNames(allocation.TypeExclusive))
			}
			pool := s.node.index[name].Pool()
			within = within.Union(pool).Union(allocate.SetOf(s.node.Pools.Offline[name]))
			mine := held.Intersection(pool)
			if !mine.IsSubsetOf(free) {
				return fmt.Errorf("CPUs %s of pool %q are held by another container (%s)", mine.Difference(free), name,
					s.holders(mine.Difference(free)))
			}
			take[name] = mine
		}
		if !held.IsSubsetOf(within) {
			return fmt.Errorf("CPUs %s are not all in pool %s (%s)", a.Held(), strings.Join(quoted(a.ExclusivePools()), " or "), within)
		}
		if err := s.checkShare(a); err != nil {
			return err // before taking the CPUs: a refused record holds nothing
		}
		for name, mine := range take {
			s.free[name] = s.free[name].Difference(mine)
		}
	} else if err := s.checkShare(a); err != nil {
		return err
	}
	s.shared += a.MilliCPU
	s.allocs[k] = a
	return nil
}

// checkShare checks a's shared-pool share, if any, against the node and what is granted.
func (s *Ledger) checkShare(a allocation.Allocation) error {
	if a.MilliCPU <= 0 {
		return nil
	}
	p, ok := s.node.Pools.Shared()
	if !ok || p.Name != a.SharedPool {
		return fmt.Errorf("shared pool %q is not this node's shared pool", a.SharedPool)
	}
	// Against the configured capacity: shares granted before CPUs went offline are kept.
	if capacity := int64(p.CPUs.Size()+s.node.Pools.Offline[p.Name].Size()) * 1000; a.MilliCPU > capacity-s.shared {
		return fmt.Errorf("milliCPU %d: shared pool %q has %d of %d millicpu left", a.MilliCPU, p.Name, capacity-s.shared, capacity)
	}
	return nil
}

// Release forgets the container's allocation and frees what it held. It reports whether the
// container held one.
func (s *Ledger) Release(k allocation.Key) bool {
	a, ok := s.allocs[k]
	if !ok {
		return false
	}
	delete(s.allocs, k)
	for _, name := range a.ExclusivePools() {
		s.free[name] = s.free[name].Union(allocate.SetOf(a.Held()).Intersection(s.node.index[name].Pool()))
	}
	s.shared -= a.MilliCPU
	return true
}

// Get returns the container's allocation.
func (s *Ledger) Get(k allocation.Key) (allocation.Allocation, bool) {
	a, ok := s.allocs[k]
	return a, ok
}

// Len is the number of allocations.
func (s *Ledger) Len() int { return len(s.allocs) }

// Allocations returns every allocation, sorted by key.
func (s *Ledger) Allocations() []allocation.Allocation {
	out := s.Unsorted()
	SortAllocations(out)
	return out
}

// Unsorted returns every allocation in no particular order: a copy for a caller that sorts
// outside its lock.
func (s *Ledger) Unsorted() []allocation.Allocation {
	out := make([]allocation.Allocation, 0, len(s.allocs))
	for _, a := range s.allocs {
		out = append(out, a)
	}
	return out
}

// SortAllocations sorts allocations by key.
func SortAllocations(out []allocation.Allocation) {
	slices.SortFunc(out, func(a, b allocation.Allocation) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Container, b.Container))
	})
}

// Free returns the free CPUs of an exclusive pool.
func (s *Ledger) Free(pool string) cpuset.CPUSet { return s.free[pool].CPUSet() }

// SharedUsed is the millicpu granted in the shared pool.
func (s *Ledger) SharedUsed() int64 { return s.shared }

// quoted quotes each name.
func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// holders names the containers holding any of cpus, for error messages.
func (s *Ledger) holders(cpus allocate.Set) string {
	var names []string
	for _, a := range s.Allocations() {
		if allocate.SetOf(a.Held()).Intersection(cpus).Size() > 0 {
			names = append(names, fmt.Sprintf("%s/%s", a.Pod, a.Container))
		}
	}
	return fmt.Sprint(names)
}

// checkFields checks an allocation's fields against each other and the node's pools.
func (n *Node) checkFields(a allocation.Allocation) error {
	if a.MilliCPU < 0 {
		return fmt.Errorf("milliCPU %d: want 0 or more", a.MilliCPU)
	}
	if a.MilliCPU == 0 && a.SharedPool != "" {
		return fmt.Errorf("sharedPool %q with milliCPU 0: want a share above 0 or no shared pool", a.SharedPool)
	}
	switch a.Type {
	case allocation.TypeExclusive:
		if a.CPUs.IsEmpty() {
			return fmt.Errorf("exclusive allocation in pool %q has no CPUs", a.Pool)
		}
		idled := cpuset.New()
		for i, name := range a.ExclusivePools() {
			if slices.Contains(a.ExclusivePools()[:i], name) {
				return fmt.Errorf("exclusive pool %q is named twice (pool %q, extraPools %v)", name, a.Pool, a.ExtraPools)
			}
			idled = idled.Union(n.IdledSiblings(name, a.CPUs))
		}
		if extra := a.Idled.Difference(idled); !extra.IsEmpty() {
			return fmt.Errorf("idled CPUs %s are not siblings that pool %s keeps idle beside CPUs %s", extra,
				strings.Join(quoted(a.ExclusivePools()), " or "), a.CPUs)
		}
		return nil
	case allocation.TypeShared:
		if a.MilliCPU == 0 || a.Pool != a.SharedPool {
			return fmt.Errorf("shared allocation in pool %q: want milliCPU above 0 and sharedPool %q (got %d, %q)", a.Pool, a.Pool,
				a.MilliCPU, a.SharedPool)
		}
	case allocation.TypeDefault:
		if a.Pool != n.Pools.Default.Name {
			return fmt.Errorf("default-pool allocation names pool %q: want %q", a.Pool, n.Pools.Default.Name)
		}
	default:
		return fmt.Errorf("type %q: want %s, %s or %s", a.Type, allocation.TypeExclusive, allocation.TypeShared, allocation.TypeDefault)
	}
	if len(a.ExtraPools) > 0 {
		return fmt.Errorf("%s allocation names extra exclusive pools %v: only exclusive allocations do", a.Type, a.ExtraPools)
	}
	if !a.CPUs.IsEmpty() || !a.Idled.IsEmpty() {
		return fmt.Errorf("%s allocation holds CPUs %s idled %s: only exclusive allocations hold CPUs", a.Type, a.CPUs, a.Idled)
	}
	return nil
}
