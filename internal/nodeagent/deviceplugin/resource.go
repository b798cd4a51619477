package deviceplugin

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocate"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/podapi"
)

// resource is one pool advertised as an extended resource. Its devices never change; only
// their health does. Safe for concurrent use.
type resource struct {
	name      string // <domain>/<pool>
	pool      pools.Pool
	exclusive bool
	cpus      cpuset.CPUSet   // exclusive: the device CPUs (pools.Pool.Devices: one per unit)
	whole     bool            // exclusive: a device is a whole core, given with all its pool threads
	index     *allocate.Index // exclusive: layout of the device CPUs, for GetPreferredAllocation
	isolated  *allocate.Set   // exclusive, isolatedCPUs set: the device CPUs of host-isolated units, chosen first
	owned     *allocate.Index // exclusive: layout of the pool's CPUs, to expand whole-core devices
	topo      *topology.Topology
	numaInfo  *pluginapi.TopologyInfo // shared: the pool's NUMA node, nil when it spans several

	mu      sync.Mutex
	online  cpuset.CPUSet // pool CPUs online at the last health update
	changed chan struct{} // closed and replaced when health changes
}

// newResources returns a resource for each exclusive and shared pool of node, sorted by pool
// name, with the online CPUs given; the default pool is not advertised, nor a pool pods
// request through DRA (requestAPI: dra: the DRA driver publishes it, and one CPU is never
// offered through both). The domain is the pool config's resourceBaseName, else domain.
func newResources(node *plan.Node, domain string, online cpuset.CPUSet) []*resource {
	if cfg := node.Pools.Config; cfg != nil && cfg.ResourceBaseName != "" {
		domain = cfg.ResourceBaseName
	}
	var out []*resource
	for _, p := range node.Pools.Pools {
		if p.Type != allocation.TypeExclusive && p.Type != allocation.TypeShared || p.ViaDRA() {
			continue
		}
		r := &resource{name: domain + "/" + p.Name, pool: p, exclusive: p.Type == allocation.TypeExclusive,
			topo: node.Topology, online: p.CPUs.Intersection(online), changed: make(chan struct{})}
		if r.exclusive {
			r.cpus, r.whole = p.Devices, plan.UnitOf(p) == allocate.WholeCore
			if eligible, only, ok := node.IsolatedCPUs(p.Name); ok { // isolatedCPUs: require offers only these
				iso := allocate.SetOf(p.Devices.Intersection(eligible))
				if r.isolated = &iso; only {
					r.cpus = p.Devices.Intersection(eligible)
				}
			}
			r.index = allocate.NewIndex(node.Topology, r.cpus, allocate.Thread, cpuset.New())
			r.owned = allocate.NewIndex(node.Topology, p.CPUs, allocate.Thread, cpuset.New())
		} else if numa := node.Topology.NUMANodesOf(p.CPUs); numa.Size() == 1 {
			r.numaInfo = topologyInfo(numa.List()[0])
		}
		out = append(out, r)
	}
	return out
}

func topologyInfo(numa int) *pluginapi.TopologyInfo {
	return &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(numa)}}}
}

// capacity is the number of devices: device CPUs, or millicpu of the shared pool.
func (r *resource) capacity() int {
	if r.exclusive {
		return r.cpus.Size()
	}
	return r.pool.CPUs.Size() * 1000
}

// devices lists the devices with their health and a channel closed at the next change.
// An exclusive device is unhealthy while its CPU is offline; the shared pool keeps 1000
// healthy devices per online CPU, so its capacity shrinks with offline CPUs.
func (r *resource) devices() ([]*pluginapi.Device, <-chan struct{}) {
	r.mu.Lock()
	online, changed := r.online, r.changed
	r.mu.Unlock()
	health := func(ok bool) string {
		if ok {
			return pluginapi.Healthy
		}
		return pluginapi.Unhealthy
	}
	if r.exclusive {
		out := make([]*pluginapi.Device, 0, r.cpus.Size())
		for _, id := range r.cpus.List() {
			out = append(out, &pluginapi.Device{ID: strconv.Itoa(id), Health: health(online.Contains(id)),
				Topology: topologyInfo(r.topo.CPUs[id].NUMA)})
		}
		return out, changed
	}
	healthy := online.Size() * 1000
	out := make([]*pluginapi.Device, r.capacity())
	for n := range out {
		out[n] = &pluginapi.Device{ID: r.sharedID(n), Health: health(n < healthy), Topology: r.numaInfo}
	}
	return out, changed
}

// setOnline records which pool CPUs are online and wakes the ListAndWatch streams when
// that changes health.
func (r *resource) setOnline(online cpuset.CPUSet) bool {
	mine := online.Intersection(r.pool.CPUs)
	r.mu.Lock()
	defer r.mu.Unlock()
	if mine.Equals(r.online) {
		return false
	}
	r.online = mine
	r.wakeLocked()
	return true
}

// wake makes the ListAndWatch streams send the devices again.
func (r *resource) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wakeLocked()
}

func (r *resource) wakeLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// same reports whether o has the same name and devices as r.
func (r *resource) same(o *resource) bool {
	return r.name == o.name && r.pool.CPUs.Equals(o.pool.CPUs) && r.pool.HTPolicy == o.pool.HTPolicy &&
		r.cpus.Equals(o.cpus) && r.whole == o.whole && (r.isolated == nil) == (o.isolated == nil) &&
		(r.isolated == nil || r.isolated.String() == o.isolated.String())
}

func (r *resource) sharedID(n int) string { return r.pool.Name + "-" + strconv.Itoa(n) }

// cpusOf maps exclusive device IDs to their CPUs; an unknown ID is an error that names it.
func (r *resource) cpusOf(ids []string) (cpuset.CPUSet, error) {
	cpus := make([]int, 0, len(ids))
	for _, id := range ids {
		cpu, err := strconv.Atoi(id)
		if err != nil || strconv.Itoa(cpu) != id || !r.cpus.Contains(cpu) {
			return cpuset.New(), fmt.Errorf("unknown device %q: the devices of %s are the CPU IDs %s", id, r.name, r.cpus)
		}
		cpus = append(cpus, cpu)
	}
	return cpuset.New(cpus...), nil
}

// checkShared checks shared device IDs ("<pool>-<n>", n below capacity).
func (r *resource) checkShared(ids []string) error {
	for _, id := range ids {
		rest, ok := strings.CutPrefix(id, r.pool.Name+"-")
		n, err := strconv.Atoi(rest)
		if !ok || err != nil || r.sharedID(n) != id || n < 0 || n >= r.capacity() {
			return fmt.Errorf("unknown device %q: the devices of %s are %s to %s", id, r.name, r.sharedID(0), r.sharedID(r.capacity()-1))
		}
	}
	return nil
}

// allocate answers the kubelet's Allocate for one container. An exclusive container gets the
// devices' CPUs, each with its whole core's pool threads when a device is a whole core, in
// EXCLUSIVE_CPUS and in the annotations podfence.io/exclusive-cpus (for the agent, which
// takes the CPUs as given) and podfence.io/exclusive-cpus.<pool> (the same, by pool: the
// kubelet keeps the first of two plugins' values for one key, as for a container that asks
// two exclusive pools).
func (r *resource) allocate(ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("no devices of %s to allocate", r.name)
	}
	if !r.exclusive {
		if err := r.checkShared(ids); err != nil {
			return nil, err
		}
		return &pluginapi.ContainerAllocateResponse{Envs: map[string]string{plan.EnvSharedCPUs: commaList(r.pool.CPUs)}}, nil
	}
	cpus, err := r.cpusOf(ids)
	if err != nil {
		return nil, err
	}
	if r.whole {
		cpus = r.owned.CoreThreads(allocate.SetOf(cpus)).CPUSet()
	}
	return &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{plan.EnvExclusiveCPUs: commaList(cpus)},
		Annotations: map[string]string{podapi.AnnotationExclusiveCPUs: cpus.String(),
			ExclusiveCPUsAnnotation(r.pool.Name): cpus.String()},
	}, nil
}

// ExclusiveCPUsAnnotation is the container annotation that holds the CPUs a container got of
// exclusive pool pool: podfence.io/exclusive-cpus.<pool>.
func ExclusiveCPUsAnnotation(pool string) string { return podapi.AnnotationExclusiveCPUs + "." + pool }

// commaList renders CPUs as "2,3,50", the form of EXCLUSIVE_CPUS and SHARED_CPUS.
func commaList(cs cpuset.CPUSet) string {
	ids := cs.List()
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
