package allocate

import (
	"math/bits"

	"k8s.io/utils/cpuset"
)

// Set is a compact, immutable set of CPU IDs: a bitmap, cheap to copy and to test, used for
// the free CPUs of a pool on the allocation path where map-backed cpuset.CPUSet is too slow.
// Every operation returns a new value; the zero value is the empty set.
type Set struct {
	w []uint64
}

// SetOf converts a cpuset.CPUSet.
func SetOf(cs cpuset.CPUSet) Set {
	return NewSet(cs.UnsortedList()...)
}

// NewSet returns the set of the given CPU IDs (negative IDs are ignored).
func NewSet(cpus ...int) Set {
	var s Set
	for _, c := range cpus {
		if c < 0 {
			continue
		}
		for len(s.w) <= c/64 {
			s.w = append(s.w, 0)
		}
		s.w[c/64] |= 1 << (c % 64)
	}
	return s
}

// Has reports whether cpu is in the set.
func (s Set) Has(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.w) {
		return false
	}
	return s.w[cpu/64]&(1<<(cpu%64)) != 0
}

// Size is the number of CPUs in the set.
func (s Set) Size() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// Union returns s ∪ o.
func (s Set) Union(o Set) Set {
	a, b := s.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	out := append([]uint64(nil), a...)
	for i, w := range b {
		out[i] |= w
	}
	return Set{w: out}
}

// Difference returns s \ o.
func (s Set) Difference(o Set) Set {
	out := append([]uint64(nil), s.w...)
	for i := 0; i < len(out) && i < len(o.w); i++ {
		out[i] &^= o.w[i]
	}
	return Set{w: out}
}

// Intersection returns s ∩ o.
func (s Set) Intersection(o Set) Set {
	n := min(len(s.w), len(o.w))
	out := make([]uint64, n)
	for i := range n {
		out[i] = s.w[i] & o.w[i]
	}
	return Set{w: out}
}

// IsSubsetOf reports whether every CPU of s is in o.
func (s Set) IsSubsetOf(o Set) bool {
	for i, w := range s.w {
		var ow uint64
		if i < len(o.w) {
			ow = o.w[i]
		}
		if w&^ow != 0 {
			return false
		}
	}
	return true
}

// List returns the CPU IDs in ascending order.
func (s Set) List() []int {
	out := make([]int, 0, s.Size())
	for i, w := range s.w {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, i*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// CPUSet converts to a cpuset.CPUSet.
func (s Set) CPUSet() cpuset.CPUSet { return cpuset.New(s.List()...) }

// String is the Linux list form ("0-3,8").
func (s Set) String() string { return s.CPUSet().String() }
