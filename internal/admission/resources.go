package admission

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Bounds on pool amounts, as the pinning annotation has them: a typo is an error.
const (
	maxCPUs     = topology.MaxCPUID + 1
	maxMilliCPU = maxCPUs * 1000
)

// ResourceError is a container resource the webhook refuses: the container, the resource
// and its value, and the rule it breaks.
type ResourceError struct {
	Container string
	Init      bool
	Resource  string
	Value     string
	Rule      string
}

func (e *ResourceError) Error() string {
	kind := "container"
	if e.Init {
		kind = "init container"
	}
	v := ""
	if e.Value != "" {
		v = "=" + e.Value
	}
	return fmt.Sprintf("%s %q: resource %s%s: %s", kind, e.Container, e.Resource, v, e.Rule)
}

// container is a pod's container or init container (the pod's own, not a copy).
type container struct {
	*corev1.Container
	Init bool
}

// containers lists init containers first, as the kubelet starts them.
func containers(pod *corev1.Pod) []container {
	out := make([]container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, container{&pod.Spec.InitContainers[i], true})
	}
	for i := range pod.Spec.Containers {
		out = append(out, container{&pod.Spec.Containers[i], false})
	}
	return out
}

// poolRequest is one container's checked pool request.
type poolRequest struct {
	Exclusive, ExclusiveResource string // pool and the resource that named it; "" for none
	CPUs                         int64
	Shared, SharedResource       string
	MilliCPU                     int64
}

// amounts is the container's entry in the cpu-pools annotation: pool → devices.
func (r poolRequest) amounts() map[string]int64 {
	m := map[string]int64{}
	if r.Exclusive != "" {
		m[r.Exclusive] = r.CPUs
	}
	if r.Shared != "" {
		m[r.Shared] = r.MilliCPU
	}
	return m
}

// poolRequests reads and checks every container's pool resources. Every container gets an
// entry, empty when it asks for no pool. The rules, each named in its error:
//   - limits set, and requests equal to them when set (pool resources are extended
//     resources; the API server defaults requests to limits);
//   - an exclusive pool counts whole CPUs, 1 to 8192;
//   - the shared pool counts millicpu as whole devices, 1 to 8192000 (500 = half a CPU);
//   - a default-type pool (neither exclusive… nor shared…) is not a resource;
//   - a container asks at most one exclusive and one shared pool, each under one domain;
//   - when cfg has pool configs, the pool is declared by one of them.
func poolRequests(pod *corev1.Pod, cfg *Config) (map[string]poolRequest, error) {
	check := cfg != nil && len(cfg.Pools) > 0
	known := cfg.knownPools()
	out := map[string]poolRequest{}
	var errs []error
	for _, c := range containers(pod) {
		r, err := containerPools(c, check, known)
		errs = append(errs, err)
		out[c.Name] = r
	}
	return out, errors.Join(errs...)
}

// containerPools checks one container; with check, pools must be in known.
func containerPools(c container, check bool, known []string) (poolRequest, error) {
	var r poolRequest
	var errs []error
	for _, name := range resourceNames(c.Resources) {
		pool, ok := pools.ParseResourceName(name)
		if !ok {
			continue
		}
		bad := func(value, rule string, args ...any) {
			errs = append(errs, &ResourceError{Container: c.Name, Init: c.Init, Resource: name, Value: value, Rule: fmt.Sprintf(rule, args...)})
		}
		q, ok := limit(c.Resources, corev1.ResourceName(name), bad)
		if !ok {
			continue
		}
		n, whole := q.AsInt64()
		switch t := pools.TypeOf(pool); {
		case t == allocation.TypeDefault:
			bad(q.String(), "pool %q is a default pool (its name starts with neither exclusive nor shared), which is not a resource: "+
				"a container that asks for no pool runs on it", pool)
		case check && !slices.Contains(known, pool):
			bad(q.String(), "pool %q is in no pool config; known pools: %s", pool, strings.Join(known, ", "))
		case t == allocation.TypeExclusive && (!whole || n < 1 || n > maxCPUs):
			bad(q.String(), "an exclusive pool counts whole CPUs: want a whole number from 1 to %d, such as 2", maxCPUs)
		case t == allocation.TypeShared && (!whole || n < 1 || n > maxMilliCPU):
			bad(q.String(), "the shared pool counts millicpu, one device each: want a whole number from 1 to %d, such as 500 for half "+
				"a CPU (not 500m or 0.5)", maxMilliCPU)
		case t == allocation.TypeExclusive && r.Exclusive != "":
			bad(q.String(), "%s", onePool(t, r.Exclusive, r.ExclusiveResource, pool))
		case t == allocation.TypeShared && r.Shared != "":
			bad(q.String(), "%s", onePool(t, r.Shared, r.SharedResource, pool))
		case t == allocation.TypeExclusive:
			r.Exclusive, r.ExclusiveResource, r.CPUs = pool, name, n
		default:
			r.Shared, r.SharedResource, r.MilliCPU = pool, name, n
		}
	}
	return r, errors.Join(errs...)
}

func onePool(t allocation.PoolType, first, firstResource, pool string) string {
	if first == pool {
		return fmt.Sprintf("pool %q is also asked for as %s: name it once", pool, firstResource)
	}
	return fmt.Sprintf("a container uses at most one %s pool, and it also asks for %s", t, firstResource)
}

// limit returns the resource's limit, after checking that it is set and that requests, when
// set, equal it; else it reports through bad. Sign and size are the caller's to check.
func limit(res corev1.ResourceRequirements, name corev1.ResourceName, bad func(value, rule string, args ...any)) (resource.Quantity, bool) {
	lim, hasLim := res.Limits[name]
	req, hasReq := res.Requests[name]
	switch {
	case !hasLim:
		bad(req.String(), "set in requests only: set limits (requests default to them)")
	case hasReq && req.Cmp(lim) != 0:
		bad(lim.String(), "requests %s differ from limits %s: want requests equal to limits", req.String(), lim.String())
	default:
		return lim, true
	}
	return resource.Quantity{}, false
}

// resourceNames lists the names in limits or requests, sorted.
func resourceNames(res corev1.ResourceRequirements) []string {
	var names []string
	for n := range res.Limits {
		names = append(names, string(n))
	}
	for n := range res.Requests {
		if _, dup := res.Limits[n]; !dup {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	return names
}
