package admission

import (
	"errors"
	"fmt"
	"maps"
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
	Exclusive              []exclusiveRequest // sorted by pool; CPU-Pooler lets a container ask several
	Shared, SharedResource string
	MilliCPU               int64
	// Default lists the resources that name a pool of the default type: passed over, as
	// CPU-Pooler's webhook passes them over (no device plugin advertises them).
	Default []exclusiveRequest
}

// exclusiveRequest is one exclusive (or passed-over default-type) pool a container asks for.
type exclusiveRequest struct {
	Pool, Resource string
	CPUs           int64
}

// amounts is the container's entry in the cpu-pools annotation: pool → devices.
func (r poolRequest) amounts() map[string]int64 {
	m := map[string]int64{}
	for _, e := range r.Exclusive {
		m[e.Pool] = e.CPUs
	}
	if r.Shared != "" {
		m[r.Shared] = r.MilliCPU
	}
	return m
}

// exclusiveCPUs is the container's exclusive request over all its exclusive pools.
func (r poolRequest) exclusiveCPUs() int64 {
	var n int64
	for _, e := range r.Exclusive {
		n += e.CPUs
	}
	return n
}

// poolRequests reads and checks every container's pool resources. Every container gets an
// entry, empty when it asks for no pool. The rules, each named in its error:
//   - limits set, and requests equal to them when set (pool resources are extended
//     resources; the API server defaults requests to limits);
//   - an exclusive pool counts whole CPUs, 1 to 8192;
//   - the shared pool counts millicpu as whole devices, 1 to 8192000 (500 = half a CPU);
//   - a container asks at most one shared pool, and each pool under one domain;
//   - when cfg has pool configs, the pool is declared by one of them, and not requested
//     through DRA by all that declare it (requestAPI: dra).
//
// A resource naming a pool of the default type (neither exclusive… nor shared…) is passed
// over, as CPU-Pooler's webhook does: Mutate warns that nothing advertises it. Resource
// names are <domain>/<pool> for the domains of pools.Domains(cfg.Pools...).
func poolRequests(pod *corev1.Pod, cfg *Config) (map[string]poolRequest, error) {
	check := cfg != nil && len(cfg.Pools) > 0
	var configs []*pools.Config
	if cfg != nil {
		configs = cfg.Pools
	}
	declared, domains := declaredPools(configs), pools.Domains(configs...)
	known, dra := cfg.knownPools(), cfg.draPools()
	out := map[string]poolRequest{}
	var errs []error
	for _, c := range containers(pod) {
		r, err := containerPools(c, check, declared, known, dra, domains)
		errs = append(errs, err)
		out[c.Name] = r
	}
	return out, errors.Join(errs...)
}

// containerPools checks one container; with check, pools must be in declared (known, the
// exclusive and shared ones, are named in the error) and not in dra (pools requested
// through DRA).
func containerPools(c container, check bool, declared, known, dra, domains []string) (poolRequest, error) {
	var r poolRequest
	var errs []error
	for _, name := range resourceNames(c.Resources) {
		pool, ok := pools.ParseResourceNameIn(name, domains)
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
		case check && !slices.Contains(declared, pool):
			bad(q.String(), "pool %q is in no pool config; known pools: %s", pool, strings.Join(known, ", "))
		case check && slices.Contains(dra, pool):
			bad(q.String(), "pool %q is requested through DRA (requestAPI: dra in its pool config), not as an extended resource: "+
				"no device plugin advertises it; ask for it with a ResourceClaim of DeviceClass %s", pool, draClass(t))
		case t == allocation.TypeDefault:
			r.Default = append(r.Default, exclusiveRequest{Pool: pool, Resource: name, CPUs: n})
		case t == allocation.TypeExclusive && (!whole || n < 1 || n > maxCPUs):
			bad(q.String(), "an exclusive pool counts whole CPUs: want a whole number from 1 to %d, such as 2", maxCPUs)
		case t == allocation.TypeShared && (!whole || n < 1 || n > maxMilliCPU):
			bad(q.String(), "the shared pool counts millicpu, one device each: want a whole number from 1 to %d, such as 500 for half "+
				"a CPU (not 500m or 0.5)", maxMilliCPU)
		case t == allocation.TypeExclusive:
			if i := slices.IndexFunc(r.Exclusive, func(e exclusiveRequest) bool { return e.Pool == pool }); i >= 0 {
				bad(q.String(), "pool %q is also asked for as %s: name it once", pool, r.Exclusive[i].Resource)
				continue
			}
			r.Exclusive = append(r.Exclusive, exclusiveRequest{Pool: pool, Resource: name, CPUs: n})
		case r.Shared == pool:
			bad(q.String(), "pool %q is also asked for as %s: name it once", pool, r.SharedResource)
		case r.Shared != "":
			bad(q.String(), "a container uses at most one shared pool, and it also asks for %s", r.SharedResource)
		default:
			r.Shared, r.SharedResource, r.MilliCPU = pool, name, n
		}
	}
	slices.SortFunc(r.Exclusive, func(a, b exclusiveRequest) int { return strings.Compare(a.Pool, b.Pool) })
	return r, errors.Join(errs...)
}

// draClass names the DeviceClass of deploy/dra for a pool type.
func draClass(t allocation.PoolType) string {
	if t == allocation.TypeShared {
		return "shared-cpus.podfence.io"
	}
	return "exclusive-cpus.podfence.io"
}

// declaredPools returns the pools any of configs declares, every type, sorted.
func declaredPools(configs []*pools.Config) []string {
	var names []string
	for _, pc := range configs {
		for _, p := range pc.Pools {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// defaultPoolWarnings tells the user, one warning per container, which of its resources name
// a pool of the default type: nothing advertises them, so such a pod stays Pending.
func defaultPoolWarnings(reqs map[string]poolRequest) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		var names []string
		for _, d := range reqs[name].Default {
			names = append(names, d.Resource)
		}
		if len(names) > 0 {
			out = append(out, fmt.Sprintf("container %q: %s: a pool of the default type (neither exclusive… nor shared…), "+
				"which no device plugin advertises, so the pod stays Pending until something does; a container that asks for no "+
				"pool runs on the default pool", name, strings.Join(names, ", ")))
		}
	}
	return out
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
