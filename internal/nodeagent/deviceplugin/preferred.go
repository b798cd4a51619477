package deviceplugin

import (
	"fmt"
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocate"
)

// preferred answers GetPreferredAllocation for one container: AllocationSize devices among
// the available and must-include ones, every must-include device among them.
func (r *resource) preferred(req *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	size, must := int(req.AllocationSize), req.MustIncludeDeviceIDs
	if !r.exclusive {
		if err := r.checkShared(append(must[:len(must):len(must)], req.AvailableDeviceIDs...)); err != nil {
			return nil, err
		}
		return r.pickShared(req.AvailableDeviceIDs, must, size)
	}
	avail, err := r.cpusOf(req.AvailableDeviceIDs)
	if err != nil {
		return nil, fmt.Errorf("available devices: %w", err)
	}
	mustCPUs, err := r.cpusOf(must)
	if err != nil {
		return nil, fmt.Errorf("must-include devices: %w", err)
	}
	avail = avail.Union(mustCPUs)
	if size < mustCPUs.Size() || size > avail.Size() {
		return nil, fmt.Errorf("cannot choose %d devices of %s: %d must be included, %d are available",
			size, r.name, mustCPUs.Size(), avail.Size())
	}
	chosen := r.choose(avail, mustCPUs, size).List()
	ids := make([]string, len(chosen))
	for i, cpu := range chosen {
		ids[i] = strconv.Itoa(cpu)
	}
	return ids, nil
}

// choose picks size CPUs of avail that include must, the allocator's way: must first, then
// the free SMT siblings of must's cores, then the allocator's choice (host-isolated CPUs first
// for a pool with isolatedCPUs, whole cores, one NUMA node, packed) on must's NUMA nodes if it
// fits there, else anywhere in avail.
func (r *resource) choose(avail, must cpuset.CPUSet, size int) cpuset.CPUSet {
	chosen := must
	for _, cpu := range must.List() {
		for _, sib := range r.topo.Siblings(cpu).Intersection(avail).List() {
			if chosen.Size() < size {
				chosen = chosen.Union(cpuset.New(sib))
			}
		}
	}
	rest := size - chosen.Size()
	if rest == 0 {
		return chosen
	}
	free := allocate.SetOf(avail.Difference(chosen))
	var scopes []allocate.Set
	if !must.IsEmpty() {
		var near []int
		for _, numa := range r.topo.NUMANodesOf(must).List() {
			near = append(near, r.topo.CPUsInNUMA(numa).List()...)
		}
		scopes = append(scopes, free.Intersection(allocate.NewSet(near...)))
	}
	for _, scope := range append(scopes, free) {
		res, err := r.index.Exclusive(scope, rest)
		if r.isolated != nil { // isolatedCPUs: the host-isolated devices first
			res, err = r.index.ExclusiveFrom(scope, rest, *r.isolated, false)
		}
		if err == nil {
			return chosen.Union(res.CPUs.CPUSet())
		}
	}
	return chosen.Union(cpuset.New(free.List()[:rest]...)) // not reached: free holds rest CPUs
}

// pickShared returns must, then available IDs in the kubelet's order, size in all: shared
// devices are interchangeable millicpu.
func (r *resource) pickShared(avail, must []string, size int) ([]string, error) {
	var all []string
	seen := map[string]bool{}
	for _, id := range append(must[:len(must):len(must)], avail...) {
		if !seen[id] {
			seen[id] = true
			all = append(all, id)
		}
	}
	if size < len(must) || size > len(all) {
		return nil, fmt.Errorf("cannot choose %d devices of %s: %d must be included, %d are available",
			size, r.name, len(must), len(all))
	}
	return all[:size], nil
}
