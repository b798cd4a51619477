package admission

import (
	"errors"
	"fmt"
	"slices"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/pinning"
	"github.com/podfence/podfence/podapi"
)

// checkPinning checks the process pinning annotation against the pool requests. Under
// podfence.io/cpus it applies the agent's own rules (pinning.Spec.Check), so that the webhook
// refuses a pod with the words the agent would use: every entry names a container of the
// pod, every exclusive or shared process names a pool its container asks for, and the
// processes' CPUs fit the request. Under CPU-Pooler's nokia.k8s.io/cpus alone it applies
// CPU-Pooler's webhook rules instead (cpuPoolerRules), so that the pods CPU-Pooler admits
// are admitted.
func checkPinning(annotations map[string]string, reqs map[string]poolRequest) []error {
	spec, ok, err := pinning.FromAnnotations(annotations)
	if !ok || err != nil {
		return []error{err}
	}
	key := pinning.Key
	if _, ok := annotations[key]; !ok {
		key = pinning.CPUPoolerKey
	}
	if key == pinning.CPUPoolerKey {
		if err := cpuPoolerRules(spec, reqs); err != nil {
			return []error{&podapi.AnnotationError{Key: key, Value: annotations[key], Err: err}}
		}
		return nil
	}
	pools := make(map[string]pinning.Pools, len(reqs))
	for name, r := range reqs {
		pools[name] = r.pinningPools()
	}
	if err := spec.Check(pools); err != nil {
		return []error{&podapi.AnnotationError{Key: key, Value: annotations[key], Err: err}}
	}
	return nil
}

// cpuPoolerRules are CPU-Pooler's webhook checks of its annotation (validateAnnotation and
// CPUAnnotation.Decode in its cmd/webhook and pkg/types), for each container entry: every
// process names its binary and a cpus other than 0; the container asks for a pool resource;
// its shared processes' millicpu add up to its shared request exactly; every process's pool
// is one the container asks for, of any type; and the processes of a pool ask for at most
// twice its request (a multiThreaded pool gives the cores' sibling threads too). The
// agent checks the processes against the CPUs it gives when it starts the container.
func cpuPoolerRules(spec pinning.Spec, reqs map[string]poolRequest) error {
	var errs []error
	for _, c := range spec.Containers {
		if err := cpuPoolerContainer(c, reqs[c.Name]); err != nil {
			errs = append(errs, fmt.Errorf("container %q: %w (CPU-Pooler's rule)", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

func cpuPoolerContainer(c pinning.Container, r poolRequest) error {
	asked := map[string]int64{} // pool → request, every type
	for _, e := range append(slices.Clone(r.Exclusive), r.Default...) {
		asked[e.Pool] = e.CPUs
	}
	if r.Shared != "" {
		asked[r.Shared] = r.MilliCPU
	}
	sum, shared := map[string]int64{}, int64(0)
	for i, p := range c.Processes {
		switch {
		case p.Path == "":
			return fmt.Errorf(`process %d: "process" is empty: want the binary to start`, i)
		case p.CPUs == 0:
			return fmt.Errorf(`process %d (%s): "cpus" is 0 or missing: want the CPUs it runs on`, i, p.Path)
		}
		sum[p.Pool] += int64(p.CPUs)
		if p.Type() == allocation.TypeShared {
			shared += int64(p.CPUs)
		}
	}
	if len(asked) == 0 {
		return errors.New("the annotation names it, but it asks for no pool resource")
	}
	if shared != r.MilliCPU {
		return fmt.Errorf("its shared processes ask for %d millicpu in all, its shared pool request is %d: want them equal", shared,
			r.MilliCPU)
	}
	for _, p := range c.Processes {
		n, ok := asked[p.Pool]
		switch {
		case !ok:
			return fmt.Errorf("process pool %q is not among its pool resources (%s)", p.Pool, r.names())
		case sum[p.Pool] > 2*n:
			return fmt.Errorf("its processes ask for %d CPUs of pool %q, more than twice its request of %d (the most, when a "+
				"multiThreaded pool gives each core's sibling thread too)", sum[p.Pool], p.Pool, n)
		}
	}
	return nil
}

// names lists the pools the request names, for messages.
func (r poolRequest) names() string {
	var names []string
	for _, e := range append(slices.Clone(r.Exclusive), r.Default...) {
		names = append(names, e.Pool)
	}
	if r.Shared != "" {
		names = append(names, r.Shared)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// pinningPools is the request as the pinning rules see it. The counts fit an int: poolRequests
// bounds them (8192 CPUs, 8192000 millicpu, each pool).
func (r poolRequest) pinningPools() pinning.Pools {
	p := pinning.Pools{CPUs: int(r.exclusiveCPUs()), Shared: r.Shared, MilliCPU: int(r.MilliCPU)}
	for i, e := range r.Exclusive {
		if i == 0 {
			p.Exclusive = e.Pool
		} else {
			p.MoreExclusive = append(p.MoreExclusive, e.Pool)
		}
	}
	return p
}
