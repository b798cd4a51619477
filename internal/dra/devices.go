package dra

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// Devices are the inventory's devices as published: the units (in Units order), then the
// shared device, then the EPC device.
func (inv *Inventory) Devices() []resourceapi.Device {
	var out []resourceapi.Device
	dies, smt := hasDies(inv.topo), inv.topo != nil && inv.topo.SMT()
	for _, u := range inv.Units {
		c := inv.topo.CPUs[u.CPUs.List()[0]]
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrPool:             str(u.Pool),
			AttrCPUs:             str(u.CPUs.String()),
			AttrThreads:          num(u.CPUs.Size()),
			AttrCoreID:           num(u.Core),
			AttrSocket:           num(c.Socket),
			AttrNUMANode:         num(c.NUMA),
			AttrStandardNUMANode: num(c.NUMA),
			AttrL3CacheID:        num(c.L3),
			AttrSMT:              {BoolValue: ptr.To(smt)},
			AttrWholeCore:        {BoolValue: ptr.To(u.WholeCore)},
		}
		if dies {
			attrs[AttrDie] = num(c.Die)
		}
		out = append(out, resourceapi.Device{Name: u.Device, Attributes: attrs})
	}
	if s := inv.Shared; s != nil {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrPool: str(s.Pool),
			AttrSMT:  {BoolValue: ptr.To(smt)},
		}
		if n, ok := only(inv.topo, s.CPUs, func(c topology.CPU) int { return c.NUMA }); ok {
			attrs[AttrNUMANode], attrs[AttrStandardNUMANode] = num(n), num(n)
		}
		if n, ok := only(inv.topo, s.CPUs, func(c topology.CPU) int { return c.Socket }); ok {
			attrs[AttrSocket] = num(n)
		}
		out = append(out, resourceapi.Device{Name: s.Device, Attributes: attrs, AllowMultipleAllocations: ptr.To(true),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapMilliCPU: {
				Value: *resource.NewQuantity(s.MilliCPU, resource.DecimalSI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    resource.NewQuantity(1000, resource.DecimalSI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(1, resource.DecimalSI)},
				}}}})
	}
	if inv.hasEPC() {
		page := resource.NewQuantity(epcPage, resource.BinarySI)
		out = append(out, resourceapi.Device{Name: EPCDevice, AllowMultipleAllocations: ptr.To(true),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapEPC: {
				Value: *resource.NewQuantity(inv.EPCBytes, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    page,
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: page, Step: page},
				}}}})
	}
	return out
}

// hasEPC: the EPC device is published when its request policy is valid, which needs room
// for min + step (two pages).
func (inv *Inventory) hasEPC() bool { return inv.EPCBytes >= 2*epcPage }

// MaxSliceDevices is the most devices Chunks puts in one ResourceSlice (the API's limit for
// devices without taints, counters or list attributes).
const MaxSliceDevices = resourceapi.ResourceSliceMaxDevices

// Chunks splits devices, in order, into ResourceSlice-sized groups.
func Chunks(devices []resourceapi.Device) [][]resourceapi.Device {
	var out [][]resourceapi.Device
	for len(devices) > MaxSliceDevices {
		out = append(out, devices[:MaxSliceDevices:MaxSliceDevices])
		devices = devices[MaxSliceDevices:]
	}
	if len(devices) > 0 {
		out = append(out, devices)
	}
	return out
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func num(n int) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: ptr.To(int64(n))}
}

// hasDies reports whether some socket has more than one die.
func hasDies(topo *topology.Topology) bool {
	if topo == nil {
		return false
	}
	first := map[int]int{} // socket → a die seen in it
	for _, c := range topo.CPUs {
		if d, ok := first[c.Socket]; ok && d != c.Die {
			return true
		}
		first[c.Socket] = c.Die
	}
	return false
}

// only returns key of the CPUs in set when they all have the same one.
func only(topo *topology.Topology, set cpuset.CPUSet, key func(topology.CPU) int) (int, bool) {
	vals := map[int]bool{}
	for _, id := range set.List() {
		vals[key(topo.CPUs[id])] = true
	}
	for v := range vals {
		return v, len(vals) == 1
	}
	return 0, false
}
