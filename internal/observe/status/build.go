package status

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Build returns the report of node with allocs: topology, pools and containers. sections
// are the extensions' states by extension name: each is kept as JSON, and the known ones
// (SectionEPC, SectionCoreSched) fill the containers' EPC and Group. A section that does
// not encode is left out with a warning. The caller sets Node, Source, Time, Ready and
// Kernel.
func Build(node *plan.Node, allocs []allocation.Allocation, sections map[string]any) Report {
	r := Report{PoolConfig: node.Pools.Source, Topology: topologyOf(node.Topology)}
	r.Pools = pools(node, allocs)
	for _, a := range allocs {
		r.Containers = append(r.Containers, container(node, a))
	}
	for name, s := range sections {
		b, err := json.Marshal(s)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("extension %s: encode its state: %v", name, err))
			continue
		}
		if r.Extensions == nil {
			r.Extensions = map[string]json.RawMessage{}
		}
		r.Extensions[name] = b
	}
	r.Warnings = append(r.Warnings, node.Warnings()...)
	r.Warnings = append(r.Warnings, r.merge()...)
	slices.SortFunc(r.Containers, func(a, b Container) int { return cmp.Compare(a.Name(), b.Name()) })
	slices.Sort(r.Warnings)
	return r
}

func topologyOf(t *topology.Topology) Topology {
	out := Topology{Summary: t.Summary(), Sockets: len(t.Sockets()), NUMANodes: len(t.NUMANodes()),
		Cores: len(t.Cores()), ThreadsPerCore: t.ThreadsPerCore(), Offline: t.Offline.String(), Isolation: t.Isolation.Lists()}
	for _, id := range t.Online().List() {
		out.CPUs = append(out.CPUs, t.CPUs[id])
	}
	return out
}

// pools summarises each pool, exclusive pools first, then shared, then default.
func pools(node *plan.Node, allocs []allocation.Allocation) []Pool {
	var out []Pool
	for _, p := range node.Pools.Pools {
		if p.Type == allocation.TypeDefault && p.Name == node.Pools.Default.Name {
			p = node.Pools.Default // with the CPUs no pool names
		}
		u := Pool{Name: p.Name, Type: p.Type, CPUs: p.CPUs.String(), Offline: node.Pools.Offline[p.Name].String()}
		if p.Type == allocation.TypeExclusive {
			u.HTPolicy = string(p.HTPolicy)
			u.HostIsolated, u.IsolatedCPUs = p.HostIsolated.String(), string(p.Isolation.IsolatedCPUs)
		}
		given, idled := cpuset.New(), cpuset.New()
		for _, a := range allocs {
			if a.Pool == p.Name || a.SharedPool == p.Name {
				u.Containers++
			}
			switch {
			case a.Pool == p.Name && p.Type == allocation.TypeExclusive:
				given, idled = given.Union(a.CPUs.Intersection(p.CPUs)), idled.Union(a.Idled.Intersection(p.CPUs))
			case a.SharedPool == p.Name:
				u.MilliCPUGranted += a.MilliCPU
			}
		}
		switch p.Type {
		case allocation.TypeExclusive:
			u.Allocated, u.Idled = given.String(), idled.String()
			u.Free = p.CPUs.Difference(given).Difference(idled).String()
		case allocation.TypeShared:
			u.MilliCPUCapacity = int64(p.CPUs.Size()) * 1000
		}
		out = append(out, u)
	}
	slices.SortStableFunc(out, func(a, b Pool) int { return cmp.Compare(allocation.TypeRank(a.Type), allocation.TypeRank(b.Type)) })
	return out
}

// container describes allocation a, with the cpuset it runs on.
func container(node *plan.Node, a allocation.Allocation) Container {
	c := Container{Namespace: a.Namespace, Pod: a.Pod, PodUID: a.PodUID, Container: a.Container, Pool: a.Pool,
		Type: a.Type, Exclusive: a.CPUs.String(), Idled: a.Idled.String(), SharedPool: a.SharedPool, MilliCPU: a.MilliCPU}
	cpus := a.CPUs
	switch a.Type {
	case allocation.TypeDefault:
		cpus = node.Pools.Default.CPUs
	case allocation.TypeShared:
		cpus = cpuset.New()
	}
	if a.SharedPool != "" {
		if p, ok := node.Pools.Pool(a.SharedPool); ok {
			cpus = cpus.Union(p.CPUs)
		}
	}
	c.CPUs = cpus.String()
	return c
}

// merge fills the containers from the known sections. A section entry for a container the
// report lacks adds that container, without a pool.
func (r *Report) merge() []string {
	var warn []string
	index := map[string]int{}
	for i, c := range r.Containers {
		index[c.Name()] = i
	}
	at := func(ns, pod, ctr string) *Container {
		k := ns + "/" + pod + "/" + ctr
		if _, ok := index[k]; !ok {
			index[k] = len(r.Containers)
			r.Containers = append(r.Containers, Container{Namespace: ns, Pod: pod, Container: ctr})
		}
		return &r.Containers[index[k]]
	}
	var epc EPC
	if err := r.Section(SectionEPC, &epc); err != nil {
		warn = append(warn, err.Error())
	}
	for _, e := range epc.Containers {
		e := e
		at(e.Namespace, e.Pod, e.Container).EPC = &e
	}
	var cs CoreSched
	if err := r.Section(SectionCoreSched, &cs); err != nil {
		warn = append(warn, err.Error())
	}
	for _, m := range cs.Containers {
		c := at(m.Namespace, m.Pod, m.Container)
		c.Group, c.CookieState = m.Group, m.State
	}
	return warn
}

// Section decodes the extension section name into v; a missing section leaves v alone.
func (r *Report) Section(name string, v any) error {
	b, ok := r.Extensions[name]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("extension %s: decode its state: %w", name, err)
	}
	return nil
}
