package pinning

import (
	"errors"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// ErrNotEnoughCPUs is wrapped by the errors of Plan and Check when processes ask for CPUs
// the container does not have.
var ErrNotEnoughCPUs = errors.New("not enough CPUs")

// Assignment is one process and the CPUs it runs on.
type Assignment struct {
	Process Process
	// CPUs is the process's affinity. Empty means not pinned: it keeps the container's cpuset.
	CPUs cpuset.CPUSet
}

// Demand sums what procs ask: whole exclusive CPUs and shared millicpu.
func Demand(procs []Process) (exclusiveCPUs, sharedMilliCPU int) {
	for _, p := range procs {
		switch p.Type() {
		case allocation.TypeExclusive:
			exclusiveCPUs += p.CPUs
		case allocation.TypeShared:
			sharedMilliCPU += p.CPUs
		}
	}
	return exclusiveCPUs, sharedMilliCPU
}

// Plan gives each process its CPUs out of a container's exclusive and shared CPUs (the
// values of EXCLUSIVE_CPUS and SHARED_CPUS), in process order:
//   - an exclusive process takes the next p.CPUs of exclusive, in ascending CPU order, so
//     exclusive processes never share a CPU;
//   - a shared process gets all of shared;
//   - a default-pool process gets exclusive CPUs no exclusive process took, plus shared;
//     when the container has neither exclusive nor shared CPUs it is not pinned.
//
// Plan is pure. It refuses what Check refuses of the CPU counts, in the same words (so the
// webhook, the agent and podfence start agree), wrapping ErrNotEnoughCPUs with the
// numbers: more exclusive CPUs asked than the container has, a shared process in a
// container without shared CPUs, or a default-pool process left with no CPUs.
func Plan(procs []Process, exclusive, shared cpuset.CPUSet) ([]Assignment, error) {
	if err := fit(procs, exclusive.Size(), !shared.IsEmpty()); err != nil {
		return nil, err
	}
	asked, _ := Demand(procs)
	free := exclusive.List()
	taken := make([]int, 0, asked)
	out := make([]Assignment, len(procs))
	for i, p := range procs {
		out[i].Process = p
		switch p.Type() {
		case allocation.TypeExclusive:
			out[i].CPUs = cpuset.New(free[:p.CPUs]...)
			taken, free = append(taken, free[:p.CPUs]...), free[p.CPUs:]
		case allocation.TypeShared:
			out[i].CPUs = shared
		}
	}
	rest := exclusive.Difference(cpuset.New(taken...)).Union(shared)
	for i, p := range procs {
		if p.Type() == allocation.TypeDefault {
			out[i].CPUs = rest
		}
	}
	return out, nil
}

// name is how messages name the process.
func (p Process) name() string {
	if p.Path == "" {
		return "the container's command"
	}
	return p.Path
}
