package nriplugin

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/kube/podresources"
)

// poolDevices reads a container's pool request from the devices the kubelet allocated to it
// (its pod resources entry): for each resource <domain>/<pool> of one of domains (the pool
// config's pools.Domains; other resources are not pools), an exclusive pool's devices are CPU IDs (package
// deviceplugin: one per request unit, what its Allocate handed out), which become the
// request's count and the pool's exact CPUs (exact); a shared pool's devices count millicpu.
// Whether the pools exist and the CPUs fit them is the planner's call.
func poolDevices(devs podresources.Devices, domains []string) (plan.Request, map[string]cpuset.CPUSet, error) {
	req, exact := plan.Request{}, map[string]cpuset.CPUSet{}
	names := make([]string, 0, len(devs))
	for name := range devs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		pool, ok := pools.ParseResourceNameIn(name, domains)
		if !ok || len(devs[name]) == 0 {
			continue
		}
		ids := devs[name]
		q := req[pool] // the same pool in both domains: each counts
		q.Add(*resource.NewQuantity(int64(len(ids)), resource.DecimalSI))
		req[pool] = q
		if pools.TypeOf(pool) != allocation.TypeExclusive {
			continue
		}
		list := make([]int, 0, len(ids))
		for _, id := range ids {
			cpu, err := strconv.Atoi(id)
			if err != nil || cpu < 0 || cpu > topology.MaxCPUID || strconv.Itoa(cpu) != id {
				return nil, nil, fmt.Errorf("kubelet allocated device %q of %s: want a CPU ID (a whole number 0-%d), "+
					"as podfence's device plugin advertises", id, name, topology.MaxCPUID)
			}
			list = append(list, cpu)
		}
		cpus := cpuset.New(list...)
		if cpus.Size() != len(ids) || !cpus.Intersection(exact[pool]).IsEmpty() {
			return nil, nil, fmt.Errorf("kubelet allocated devices %q of %s: a CPU ID twice", ids, name)
		}
		exact[pool] = exact[pool].Union(cpus)
	}
	return req, exact, nil
}

// withDevices adds to c, planned from its annotations, the pools of its kubelet devices (req,
// exact: see poolDevices) that the annotations do not name: a pool podfence.io/exclusive-cpus
// names keeps that annotation's CPUs (the device plugin's own answer to the same allocation).
func withDevices(c plan.Container, req plan.Request, exact map[string]cpuset.CPUSet) plan.Container {
	if len(req) == 0 {
		return c
	}
	out := make(plan.Request, len(c.Request)+len(req))
	for name, q := range c.Request {
		out[name] = q
	}
	for name, q := range req {
		if _, named := out[name]; named {
			continue
		}
		out[name] = q
		if cpus, ok := exact[name]; ok {
			c.ExclusiveCPUs = c.ExclusiveCPUs.Union(cpus)
		}
	}
	c.Request = out
	return c
}
