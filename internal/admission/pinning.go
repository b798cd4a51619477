package admission

import (
	"errors"
	"fmt"
	podapi "github.com/podfence/podfence/podapi"
	"maps"
	"slices"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/pinning"
	"k8s.io/utils/cpuset"
)

// checkPinning checks the process pinning annotation against the pool requests: every entry
// names a container of the pod, every exclusive or shared process names a pool its container
// asks for, and the processes' CPUs fit the request (pinning.Plan on CPUs of that size).
func checkPinning(annotations map[string]string, reqs map[string]poolRequest) []error {
	spec, ok, err := pinning.FromAnnotations(annotations)
	if !ok || err != nil {
		return []error{err}
	}
	key := pinning.Key
	if _, ok := annotations[key]; !ok {
		key = pinning.CPUPoolerKey
	}
	var errs []error
	for _, c := range spec.Containers {
		r, ok := reqs[c.Name]
		if !ok {
			names := slices.Sorted(maps.Keys(reqs))
			errs = append(errs, fmt.Errorf("container %q: no such container in the pod (it has %s)", c.Name, strings.Join(names, ", ")))
			continue
		}
		if err := checkProcesses(c.Processes, r); err != nil {
			errs = append(errs, fmt.Errorf("container %q: %w", c.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return []error{&podapi.AnnotationError{Key: key, Value: annotations[key], Err: err}}
	}
	return nil
}

// checkProcesses checks one container's processes against its request.
func checkProcesses(procs []pinning.Process, r poolRequest) error {
	hasDefault := false
	for i, p := range procs {
		switch p.Type() {
		case allocation.TypeExclusive:
			if p.Pool != r.Exclusive {
				return fmt.Errorf("process %d (%s): exclusive pool %q is not the container's: %s", i, processName(p), p.Pool, r.describe(allocation.TypeExclusive))
			}
		case allocation.TypeShared:
			if p.Pool != r.Shared {
				return fmt.Errorf("process %d (%s): shared pool %q is not the container's: %s", i, processName(p), p.Pool, r.describe(allocation.TypeShared))
			}
		default:
			hasDefault = true
		}
	}
	excl, milli := pinning.Demand(procs)
	switch {
	case int64(excl) > r.CPUs:
		return fmt.Errorf("processes ask for %d CPUs of exclusive pool %q, more than the container's %s=%d: lower their cpus or raise the request",
			excl, r.Exclusive, r.ExclusiveResource, r.CPUs)
	case int64(milli) > r.MilliCPU:
		return fmt.Errorf("processes ask for %d millicpu of shared pool %q, more than the container's %s=%d: lower their cpus or raise the request",
			milli, r.Shared, r.SharedResource, r.MilliCPU)
	case hasDefault && r.Exclusive != "" && r.Shared == "" && int64(excl) == r.CPUs:
		return fmt.Errorf("default-pool processes get the exclusive CPUs no exclusive process takes, but exclusive processes take all %d of %s and the container has no shared pool: leave one CPU or request a shared pool",
			r.CPUs, r.ExclusiveResource)
	}
	// The same plan the starter makes, on CPUs numbered like the request; checks the rest.
	ids := make([]int, r.CPUs)
	for i := range ids {
		ids[i] = i
	}
	exclusive, shared := cpuset.New(ids...), cpuset.New()
	if r.Shared != "" {
		shared = cpuset.New(int(r.CPUs))
	}
	if _, err := pinning.Plan(procs, exclusive, shared); err != nil {
		return err
	}
	return nil
}

// describe says which pool of type t the container asks for.
func (r poolRequest) describe(t string) string {
	switch {
	case t == allocation.TypeExclusive && r.Exclusive != "":
		return fmt.Sprintf("it asks for %s=%d", r.ExclusiveResource, r.CPUs)
	case t == allocation.TypeShared && r.Shared != "":
		return fmt.Sprintf("it asks for %s=%d", r.SharedResource, r.MilliCPU)
	}
	return fmt.Sprintf("it asks for no %s pool in its resources", t)
}

func processName(p pinning.Process) string {
	if p.Path == "" {
		return "the container's command"
	}
	return p.Path
}
