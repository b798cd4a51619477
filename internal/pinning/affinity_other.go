//go:build !linux

package pinning

import (
	"errors"

	"k8s.io/utils/cpuset"
)

// SchedAffinity is the kernel's Affinity; only Linux has one.
type SchedAffinity struct{}

var _ Affinity = SchedAffinity{}

// Get fails: CPU affinity needs Linux.
func (SchedAffinity) Get(int) (cpuset.CPUSet, error) {
	return cpuset.New(), errors.New("CPU affinity needs Linux")
}

// Set fails: CPU affinity needs Linux.
func (SchedAffinity) Set(int, cpuset.CPUSet) error {
	return errors.New("CPU affinity needs Linux")
}
