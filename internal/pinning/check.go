package pinning

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Pools is what one container has of the CPU pools, which the processes of its entry must
// fit: the webhook reads it from the pod's resources, the agent from the CPUs it decided.
type Pools struct {
	// Exclusive is the container's exclusive pool ("" for none); CPUs its whole CPUs, of
	// Exclusive and of MoreExclusive, its further exclusive pools (CPU-Pooler lets a
	// container ask several).
	Exclusive     string
	MoreExclusive []string
	CPUs          int
	// Shared is the container's shared pool ("" for none); MilliCPU its share.
	Shared   string
	MilliCPU int
}

// Check checks every entry of s against the pools of the pod's containers, by name: the
// entry names a container of the pod and its processes pass Check. Each error names its
// container; they are joined.
func (s Spec) Check(containers map[string]Pools) error {
	var errs []error
	for _, c := range s.Containers {
		pools, ok := containers[c.Name]
		if !ok {
			names := slices.Sorted(maps.Keys(containers))
			errs = append(errs, fmt.Errorf("container %q: no such container in the pod (it has %s)", c.Name, strings.Join(names, ", ")))
			continue
		}
		if err := Check(c.Processes, pools); err != nil {
			errs = append(errs, fmt.Errorf("container %q: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Check checks one container's processes against its pools: every exclusive or shared
// process names the container's pool of that type, the processes ask for no more CPUs or
// millicpu than the container has, and Plan can give each of them CPUs. The webhook (on
// the pod's resources) and the agent (on its decision) both call it, so that a pod is
// refused with the same words by either.
func Check(procs []Process, c Pools) error {
	for i, p := range procs {
		switch t := p.Type(); {
		case t == allocation.TypeExclusive && p.Pool != c.Exclusive && !slices.Contains(c.MoreExclusive, p.Pool),
			t == allocation.TypeShared && p.Pool != c.Shared:
			return fmt.Errorf("process %d (%s): %s pool %q is not the container's: %s", i, p.name(), t, p.Pool, c.describe(t))
		}
	}
	if err := fit(procs, c.CPUs, c.Shared != ""); err != nil {
		return err
	}
	if _, milli := Demand(procs); milli > c.MilliCPU {
		return fmt.Errorf("%w: processes ask for %d millicpu of shared pool %q, the container has %d: lower their cpus in the "+
			"annotation or raise the container's shared pool request",
			ErrNotEnoughCPUs, milli, c.Shared, c.MilliCPU)
	}
	return nil
}

// describe says which pool of type t the container has.
func (c Pools) describe(t allocation.PoolType) string {
	switch {
	case t == allocation.TypeExclusive && c.Exclusive != "":
		return fmt.Sprintf("it asks for %d CPUs of exclusive pool %q", c.CPUs, c.Exclusive)
	case t == allocation.TypeShared && c.Shared != "":
		return fmt.Sprintf("it asks for %d millicpu of shared pool %q", c.MilliCPU, c.Shared)
	}
	return fmt.Sprintf("it asks for no %s pool in its resources", t)
}

// fit checks that Plan can give procs CPUs in a container with n exclusive CPUs and, when
// shared, the CPUs of a shared pool. Check and Plan share it, so that the webhook, the
// agent and podfence start word a misfit alike. Its errors but the first wrap
// ErrNotEnoughCPUs.
func fit(procs []Process, n int, shared bool) error {
	for i, p := range procs {
		if p.Type() == allocation.TypeExclusive && p.CPUs < 1 {
			return fmt.Errorf("process %d (%s): exclusive pool %q: cpus %d: want at least 1", i, p.name(), p.Pool, p.CPUs)
		}
	}
	asked, _ := Demand(procs)
	if asked > n {
		return fmt.Errorf("%w: exclusive processes ask for %d CPUs, the container has %d: lower their cpus in the annotation or "+
			"raise the container's exclusive pool request",
			ErrNotEnoughCPUs, asked, n)
	}
	for i, p := range procs {
		if p.Type() == allocation.TypeShared && !shared {
			return fmt.Errorf("%w: process %d (%s) is in shared pool %q, but the container has no shared CPUs: request the pool in "+
				"the container's resources",
				ErrNotEnoughCPUs, i, p.name(), p.Pool)
		}
	}
	for i, p := range procs { // they get the exclusive CPUs no exclusive process took, and the shared ones
		if p.Type() == allocation.TypeDefault && asked == n && n > 0 && !shared {
			return fmt.Errorf("%w: process %d (%s) is in default pool %q and gets the exclusive CPUs no exclusive process takes, but "+
				"exclusive processes take all %d of them and the container has no shared CPUs: leave one CPU or request a shared pool",
				ErrNotEnoughCPUs, i, p.name(), p.Pool, n)
		}
	}
	return nil
}
