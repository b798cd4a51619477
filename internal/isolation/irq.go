package isolation

import (
	"k8s.io/utils/cpuset"
)

// IRQBaseline is what the node's interrupt affinity was before podfence took CPUs out of it:
// each IRQ's smp_affinity_list and default_smp_affinity, recorded when the first CPU is taken
// out (and for an IRQ first seen later, what it had then), so that they can be given back
// exactly, also after an agent restart.
type IRQBaseline struct {
	IRQs    map[int]cpuset.CPUSet
	Default cpuset.CPUSet
}

// IRQAffinity is the affinity each IRQ and the default must have.
type IRQAffinity struct {
	IRQs    map[int]cpuset.CPUSet
	Default cpuset.CPUSet
	// Housekeeping are the online CPUs left to interrupts: an IRQ whose baseline holds only
	// CPUs taken out goes there.
	Housekeeping cpuset.CPUSet
}

// PlanIRQs returns the affinity of every IRQ in base with the CPUs in off left out: its
// baseline without them, or the housekeeping CPUs (online ones not in off) when nothing of
// its baseline remains. With nothing online outside off, every IRQ keeps its baseline: an
// interrupt must be delivered somewhere (the caller reports it).
func PlanIRQs(base IRQBaseline, online, off cpuset.CPUSet) IRQAffinity {
	hk := online.Difference(off)
	out := IRQAffinity{IRQs: make(map[int]cpuset.CPUSet, len(base.IRQs)), Housekeeping: hk}
	keep := func(b cpuset.CPUSet) cpuset.CPUSet {
		if hk.IsEmpty() {
			return b
		}
		if left := b.Difference(off).Intersection(online); !left.IsEmpty() {
			return left
		}
		return hk
	}
	for irq, b := range base.IRQs {
		out.IRQs[irq] = keep(b)
	}
	out.Default = keep(base.Default)
	return out
}
