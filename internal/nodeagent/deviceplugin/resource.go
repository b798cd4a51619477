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
	cpus      cpuset.CPUSet   // exclusive: the device CPUs (one per core under singleThreaded)
	index     *allocate.Index // exclusive: layout of the device CPUs, for GetPreferredAllocation
	topo      *topology.Topology
	numaInfo  *pluginapi.TopologyInfo // shared: the pool's NUMA node, nil when it spans several

	mu      sync.Mutex
	online  cpuset.CPUSet // pool CPUs online at the last health update
	changed chan struct{} // closed and replaced when health changes
}

// newResources returns a resource for each exclusive and shared pool of node, sorted by pool
// name, with the online CPUs given; the default pool is not advertised.
func newResources(node *plan.Node, domain string, online cpuset.CPUSet) []*resource {
	var out []*resource
	for _, p := range node.Pools.Pools {
		if p.Type != allocation.TypeExclusive && p.Type != allocation.TypeShared {
			continue
		}
		r := &resource{name: domain + "/" + p.Name, pool: p, exclusive: p.Type == allocation.TypeExclusive,
			topo: node.Topology, online: p.CPUs.Intersection(online), changed: make(chan struct{})}
		if r.exclusive {
			r.cpus = deviceCPUs(node.Topology, p)
			r.index = allocate.NewIndex(node.Topology, r.cpus, false)
		} else if numa := node.Topology.NUMANodesOf(p.CPUs); numa.Size() == 1 {
			r.numaInfo = topologyInfo(numa.List()[0])
		}
		out = append(out, r)
	}
	return out
}

// deviceCPUs returns the CPUs of an exclusive pool that are devices: every CPU under
// multiThreaded; under singleThreaded the lowest pool thread of each core, as one request
// unit holds a whole core there (the allocator gives that thread and idles its siblings).
func deviceCPUs(topo *topology.Topology, p pools.Pool) cpuset.CPUSet {
	if p.HTPolicy != pools.SingleThreaded {
		return p.CPUs
	}
	var ids []int
	for _, id := range p.CPUs.List() {
		if first := topo.Siblings(id).Intersection(p.CPUs).List(); len(first) > 0 && first[0] == id {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
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
	return r.name == o.name && r.pool.CPUs.Equals(o.pool.CPUs) && r.pool.HTPolicy == o.pool.HTPolicy
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

// allocate answers the kubelet's Allocate for one container.
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
	return &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{plan.EnvExclusiveCPUs: commaList(cpus)},
		Annotations: map[string]string{podapi.AnnotationExclusiveCPUs: cpus.String()},
	}, nil
}

// commaList renders CPUs as "2,3,50", the form of EXCLUSIVE_CPUS and SHARED_CPUS.
func commaList(cs cpuset.CPUSet) string {
	ids := cs.List()
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
