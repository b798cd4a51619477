package dra

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Unit is one request unit of an exclusive DRA pool: the CPUs one device gives.
type Unit struct {
	Device string        // cpu-<lowest CPU of CPUs>
	Pool   string        // the exclusive pool
	CPUs   cpuset.CPUSet // never empty
	Core   int           // the core's lowest online thread
	// WholeCore: CPUs are every online thread of the core.
	WholeCore bool
}

// Shared is the shared pool's device when that pool is a DRA pool.
type Shared struct {
	Device   string // shared-<pool as a DNS label>
	Pool     string
	CPUs     cpuset.CPUSet
	MilliCPU int64 // CPUs x 1000
}

// Inventory is what the driver publishes for one node, and what a claim's devices stand for.
// Units are sorted by pool name, then by their lowest CPU. The zero value publishes nothing.
type Inventory struct {
	Units  []Unit
	Shared *Shared // nil: no DRA shared pool
	// EPCBytes is the node's SGX EPC (0: none, no EPC device).
	EPCBytes int64

	topo   *topology.Topology
	byName map[string]int // unit device name → index in Units
}

// NewInventory takes the DRA pools of layout (resolved on topo) and the node's EPC capacity
// in bytes (0 when it has none).
func NewInventory(topo *topology.Topology, layout *pools.Node, epcBytes int64) (*Inventory, error) {
	if epcBytes < 0 {
		return nil, fmt.Errorf("EPC capacity %d bytes: want 0 (none) or more", epcBytes)
	}
	inv := &Inventory{EPCBytes: epcBytes, topo: topo, byName: map[string]int{}}
	for _, p := range layout.Pools {
		if p.API != pools.DRA {
			continue
		}
		switch p.Type {
		case allocation.TypeExclusive:
			inv.Units = append(inv.Units, units(topo, p)...)
		case allocation.TypeShared:
			if p.CPUs.IsEmpty() { // every CPU offline: nothing to offer
				continue
			}
			inv.Shared = &Shared{Device: sharedName(p.Name), Pool: p.Name, CPUs: p.CPUs,
				MilliCPU: int64(p.CPUs.Size()) * 1000}
		}
	}
	sort.SliceStable(inv.Units, func(i, j int) bool {
		a, b := inv.Units[i], inv.Units[j]
		if a.Pool != b.Pool {
			return a.Pool < b.Pool
		}
		return a.CPUs.List()[0] < b.CPUs.List()[0]
	})
	for i, u := range inv.Units {
		inv.byName[u.Device] = i
	}
	return inv, nil
}

// units are the request units of exclusive pool p: one per device CPU (see pools.Pool.Devices);
// a WholeCores unit gives the pool's threads of the core, any other unit its one CPU.
func units(topo *topology.Topology, p pools.Pool) []Unit {
	var out []Unit
	for _, dev := range p.Devices.List() {
		cpus := cpuset.New(dev)
		if p.WholeCores {
			cpus = topo.Siblings(dev).Intersection(p.CPUs)
		}
		if cpus.IsEmpty() { // offline since the layout was resolved
			continue
		}
		core := topo.CPUs[dev].Core
		out = append(out, Unit{Device: fmt.Sprintf("%s%d", unitPrefix, cpus.List()[0]), Pool: p.Name, CPUs: cpus,
			Core: core, WholeCore: cpus.Equals(topo.CPUsInCore(core))})
	}
	return out
}

// Unit returns the unit a device name stands for.
func (inv *Inventory) Unit(device string) (Unit, bool) {
	i, ok := inv.byName[device]
	if !ok {
		return Unit{}, false
	}
	return inv.Units[i], true
}

// CPUs are the CPUs of all units.
func (inv *Inventory) CPUs() cpuset.CPUSet {
	all := cpuset.New()
	for _, u := range inv.Units {
		all = all.Union(u.CPUs)
	}
	return all
}

// sharedName is the shared pool's device name: shared-<pool> as a DNS label (lower case, '_'
// and '.' as '-', at most 63 characters). A node has one shared pool, so it is unique.
func sharedName(pool string) string {
	name := sharedPrefix + strings.Map(func(r rune) rune {
		if r == '_' || r == '.' {
			return '-'
		}
		return r
	}, strings.ToLower(pool))
	return strings.TrimRight(name[:min(len(name), 63)], "-")
}
