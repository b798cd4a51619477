package nriplugin

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
)

// derive rebuilds what CreateContainer recorded for a live container from the runtime alone:
// the pool request its annotations carry (or its kubelet devices, as Synchronize read them)
// and the cpuset it runs on. It succeeds only when the settings podfence derives for that
// allocation are the cpuset the container runs on, so a container that was moved, or placed
// by a different pool config, is not taken for one of podfence's.
func (a *Plugin) derive(node *plan.Node, lc liveCtr) (allocation.Allocation, bool) {
	if !lc.set || lc.cpus.IsEmpty() {
		return allocation.Allocation{}, false
	}
	c, _, err := a.requestWithClaims(context.Background(), lc.pod, lc.ctr, false)
	if err != nil {
		return allocation.Allocation{}, false
	}
	al := allocation.Allocation{PodUID: c.PodUID, Namespace: c.Namespace, Pod: c.Pod, Container: c.Name,
		Pool: node.Pools.Default.Name, Type: allocation.TypeDefault}
	for _, name := range c.Request.Pools() {
		p, ok := node.Pools.Pool(name)
		if !ok {
			return allocation.Allocation{}, false
		}
		q := c.Request[name]
		size := resource.NewQuantity(int64(p.CPUs.Size()), resource.DecimalSI)
		switch p.Type {
		case allocation.TypeExclusive: // CPUs gone offline since are still the container's
			mine := p.CPUs
			if off := node.Pools.Offline[name]; off.Size() > 0 { // a union copies the pool's set: per container at Synchronize
				mine = mine.Union(off)
			}
			cpus, given := lc.cpus.Intersection(mine), c.ExclusiveCPUs.Intersection(mine)
			if q.Cmp(*resource.NewQuantity(int64(node.Units(name, cpus)), resource.DecimalSI)) != 0 || !given.IsSubsetOf(cpus) {
				return allocation.Allocation{}, false
			}
			if al.Type == allocation.TypeExclusive { // a further exclusive pool (requests are sorted)
				al.ExtraPools = append(al.ExtraPools, name)
			} else {
				al.Pool, al.Type, al.CPUs, al.Idled = name, allocation.TypeExclusive, cpuset.New(), cpuset.New()
			}
			al.CPUs, al.Idled = al.CPUs.Union(cpus), al.Idled.Union(node.IdledSiblings(name, cpus))
		case allocation.TypeShared:
			size.Mul(1000)
			if q.Cmp(*size) > 0 || q.Sign() <= 0 {
				return allocation.Allocation{}, false
			}
			al.SharedPool, al.MilliCPU = name, q.Value()
		}
	}
	if al.MilliCPU > 0 && al.Type == allocation.TypeDefault {
		al.Pool, al.Type = al.SharedPool, allocation.TypeShared
	}
	if !sameCPUs(node.Decide(al).CPUs, onlineOf(node, lc.cpus)) { // Equals is reflect.DeepEqual: slow at every container
		return allocation.Allocation{}, false
	}
	return al, true
}

// onlineOf is cpus less those offline now: the runtime keeps the cpuset it was given.
func onlineOf(node *plan.Node, cpus cpuset.CPUSet) cpuset.CPUSet {
	if len(node.Pools.Offline) == 0 {
		return cpus
	}
	return cpus.Intersection(node.Topology.Online())
}

// adoption records a container podfence did not place (or whose annotations no longer say
// how), as it runs: a cpuset inside one exclusive pool (plus, optionally, the whole shared
// pool) holds those exclusive CPUs, and their idled siblings under singleThreaded; a cpuset
// that is the shared pool, with a CFS quota, holds that share of it; a cpuset that is the
// default pool is a default-pool container. Others (no cpuset, spanning pools) stay
// unmanaged.
func (a *Plugin) adoption(lc liveCtr) (allocation.Allocation, bool) {
	if !lc.set || lc.cpus.IsEmpty() {
		return allocation.Allocation{}, false
	}
	node := a.node.Load()
	lc.cpus = onlineOf(node, lc.cpus)
	al := allocation.Allocation{PodUID: lc.key.PodUID, Namespace: lc.pod.GetNamespace(), Pod: lc.pod.GetName(), Container: lc.key.Container}
	if lc.cpus.Equals(node.Pools.Default.CPUs) {
		al.Pool, al.Type = node.Pools.Default.Name, allocation.TypeDefault
		return al, true
	}
	shared, hasShared := node.Pools.Shared()
	rest := lc.cpus
	for _, p := range node.Pools.Pools {
		if in := lc.cpus.Intersection(p.CPUs); p.Type == allocation.TypeExclusive && !in.IsEmpty() {
			al.Pool, al.Type, al.CPUs, rest = p.Name, allocation.TypeExclusive, in, lc.cpus.Difference(p.CPUs)
			al.Idled = node.IdledSiblings(p.Name, in)
			break
		}
	}
	if !rest.IsEmpty() && !(hasShared && rest.Equals(shared.CPUs)) {
		return allocation.Allocation{}, false // spans pools other than one exclusive and the shared one
	}
	if hasShared && rest.Equals(shared.CPUs) {
		cpu := lc.ctr.GetLinux().GetResources().GetCpu()
		quota, period := cpu.GetQuota().GetValue(), int64(cpu.GetPeriod().GetValue())
		if quota <= 0 || period <= 0 {
			return allocation.Allocation{}, false // no bandwidth limit: not a podfence share
		}
		milli := quota*1000/period - int64(al.CPUs.Size())*1000
		if milli <= 0 {
			return allocation.Allocation{}, false
		}
		al.SharedPool, al.MilliCPU = shared.Name, milli
		if al.Type == "" {
			al.Pool, al.Type = shared.Name, allocation.TypeShared
		}
	}
	return al, true
}

// describe is an allocation in one short line, for logs.
func describe(al allocation.Allocation) string {
	s := fmt.Sprintf("%s %s", al.Type, al.Pool)
	if !al.CPUs.IsEmpty() {
		s += " cpus=" + al.CPUs.String()
	}
	if !al.Idled.IsEmpty() {
		s += " idled=" + al.Idled.String()
	}
	if al.MilliCPU != 0 {
		s += fmt.Sprintf(" %s=%dm", al.SharedPool, al.MilliCPU)
	}
	return s
}
