package pinning

import (
	"fmt"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// SchedAffinity is the kernel's Affinity: sched_setaffinity(2), with masks sized for every
// CPU ID podfence accepts (topology.MaxCPUID), beyond the 1024 of unix.CPUSet.
type SchedAffinity struct{}

var _ Affinity = SchedAffinity{}

// Set sets the affinity of thread tid (0: the calling thread) and reads it back, so that a
// mask the container's cpuset narrows is an error rather than a silent change.
func (SchedAffinity) Set(tid int, cpus cpuset.CPUSet) error {
	set := unix.NewCPUSet(topology.MaxCPUID + 1)
	for _, id := range cpus.List() {
		if set.Set(id); !set.IsSet(id) {
			return fmt.Errorf("CPU %d is beyond the highest CPU ID %d", id, topology.MaxCPUID)
		}
	}
	if err := unix.SchedSetaffinityDynamic(tid, set); err != nil {
		return fmt.Errorf("sched_setaffinity %s: %w (are the CPUs in the container's cpuset?)", cpus, err)
	}
	got, err := SchedAffinity{}.Get(tid)
	if err != nil {
		return err
	}
	if !got.Equals(cpus) {
		return fmt.Errorf("asked for CPUs %s, the kernel allows %s (the container's cpuset does not hold them all)", cpus, got)
	}
	return nil
}

// Get returns the affinity of thread tid (0: the calling thread).
func (SchedAffinity) Get(tid int) (cpuset.CPUSet, error) {
	set := unix.NewCPUSet(topology.MaxCPUID + 1)
	if err := unix.SchedGetaffinityDynamic(tid, set); err != nil {
		return cpuset.New(), fmt.Errorf("sched_getaffinity: %w", err)
	}
	n := set.Count()
	ids := make([]int, 0, n)
	for id := 0; len(ids) < n; id++ {
		if set.IsSet(id) {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...), nil
}
