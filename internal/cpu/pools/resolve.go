package pools

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Resolve checks cfg against the node's topology and returns the node's pools. Every listed
// CPU must be present. A pool with offline CPUs runs degraded on its online ones (Offline
// lists the others, and a warning says so); it is not refused, so that a node with CPUs
// taken offline still runs its agent. Under Cores an exclusive pool also owns the online SMT
// siblings of its listed CPUs that no other pool lists or owns, and a core it lists twice
// counts once (a warning says so). Online CPUs no pool owns are Unpooled: they join the
// default pool under JoinDefault or when cfg declares no default-type pool (one named
// "default" is made), else they are Unused. The default pool must not end up empty.
//
// CPUs the host took out of the kernel's load balancing (topo.Isolation.Domain) are taken out
// of the default and shared pools into Unused, with a warning; a default or shared pool left
// empty so is an error. An exclusive pool's HostIsolated are its CPUs the host isolated.
// Warnings name exclusive pools that share physical cores with another pool or mix isolated
// CPUs with others.
func Resolve(cfg *Config, topo *topology.Topology) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	online := topo.Online()
	if err := cfg.checkNode(online.Union(topo.Offline)); err != nil {
		return nil, err
	}
	n := &Node{Source: cfg.Source, Config: cfg, Offline: map[string]cpuset.CPUSet{}, Unused: cpuset.New(),
		Warnings: slices.Clone(cfg.Warnings)}
	n.Default = Pool{Name: DefaultPoolName, CPUs: cpuset.New(), HTPolicy: SingleThreaded}
	taken := cpuset.New() // listed by any pool, or owned by an earlier one
	for _, p := range cfg.Pools {
		taken = taken.Union(p.CPUs)
	}
	declared := false
	for _, p := range cfg.Pools {
		if off := p.CPUs.Difference(online); !off.IsEmpty() {
			n.Offline[p.Name] = off
			p.CPUs = p.CPUs.Intersection(online)
			n.Warnings = append(n.Warnings, fmt.Sprintf("pool %q runs degraded: %s offline; it has %s",
				p.Name, cpusAre(off), orNone(p.CPUs)))
		}
		if p.Type = TypeOf(p.Name); p.Type == allocation.TypeExclusive {
			var warn string
			p, warn = exclusive(p, cfg.ExclusiveCPUs, topo, taken)
			if warn != "" {
				n.Warnings = append(n.Warnings, warn)
			}
			taken = taken.Union(p.CPUs)
			p.HostIsolated = p.CPUs.Intersection(topo.Isolation.Isolated())
		}
		if p.Type == allocation.TypeDefault {
			n.Default, declared = p, true
		} else {
			n.Pools = append(n.Pools, p)
		}
	}
	n.Unpooled = online.Difference(taken)
	domain := topo.Isolation.Domain.Intersection(online)
	if cfg.UnpooledCPUs == JoinDefault || !declared {
		n.Default.CPUs = n.Default.CPUs.Union(n.Unpooled) // those in domain leave again below
		if join := n.Unpooled.Difference(domain); !join.IsEmpty() {
			verb := "are in no pool: they join"
			if join.Size() == 1 {
				verb = "is in no pool: it joins"
			}
			n.Warnings = append(n.Warnings, fmt.Sprintf("%s %s the default pool %q", cpuNoun(join), verb, n.Default.Name))
		}
	} else {
		n.Unused = n.Unpooled
	}
	n.Default.Type = allocation.TypeDefault
	var err error
	for i, p := range n.Pools {
		if p.Type == allocation.TypeShared {
			if n.Pools[i], err = n.offDomain(p, domain); err != nil {
				return nil, err
			}
		}
	}
	if !n.Default.CPUs.IsEmpty() {
		if n.Default, err = n.offDomain(n.Default, domain); err != nil {
			return nil, err
		}
	}
	if n.Default.CPUs.IsEmpty() {
		return nil, &ConfigError{Source: cfg.Source, Field: "pools", Reason: fmt.Sprintf(
			"no CPU is left for the default pool: every online CPU (%s) is in an exclusive or shared pool, "+
				"but pod sandboxes and containers that ask for no pool need CPUs to run on; "+
				"add a pool named %q or leave some CPUs out of the other pools", online, DefaultPoolName)}
	}
	n.Pools = append(n.Pools, n.Default)
	sort.Slice(n.Pools, func(i, j int) bool { return n.Pools[i].Name < n.Pools[j].Name })
	n.Warnings = append(n.Warnings, splitCores(n, topo)...)
	n.Warnings = append(n.Warnings, hostIsolationWarnings(n)...)
	return n, nil
}

// exclusive works out what exclusive pool p (its online listed CPUs) owns and its devices.
// taken holds the CPUs other pools list or own. The warning, if any, names cores listed twice.
func exclusive(p Pool, meaning ExclusiveCPUs, topo *topology.Topology, taken cpuset.CPUSet) (Pool, string) {
	first := map[int]int{} // core → its lowest listed (Cores) or pool (Threads) CPU
	var twice []int
	for _, cpu := range p.CPUs.List() {
		core := topo.CPUs[cpu].Core
		if _, seen := first[core]; seen {
			twice = append(twice, cpu)
			continue
		}
		first[core] = cpu
	}
	var devices []int
	for _, cpu := range first {
		devices = append(devices, cpu)
	}
	p.Devices = cpuset.New(devices...)
	if meaning == Threads {
		if p.HTPolicy == MultiThreaded {
			p.Devices = p.CPUs
		}
		return p, ""
	}
	p.WholeCores = p.HTPolicy == MultiThreaded
	for _, cpu := range p.Devices.List() {
		p.CPUs = p.CPUs.Union(topo.Siblings(cpu).Difference(taken))
	}
	if len(twice) == 0 {
		return p, ""
	}
	return p, fmt.Sprintf("pool %q lists %s of physical cores it already lists (%s): each listed CPU of an exclusive pool stands "+
		"for its whole core (exclusiveCPUs: cores, CPU-Pooler's meaning), so such a core counts once; list one CPU per core, "+
		"or set exclusiveCPUs: threads to list threads", p.Name, cpuNoun(cpuset.New(twice...)), p.Devices.Intersection(
		coresOf(topo, cpuset.New(twice...))))
}

// coresOf returns the online CPUs of the physical cores of cpus.
func coresOf(topo *topology.Topology, cpus cpuset.CPUSet) cpuset.CPUSet {
	out := cpuset.New()
	for _, cpu := range cpus.List() {
		out = out.Union(topo.Siblings(cpu))
	}
	return out
}

// splitCores warns about exclusive pools that hold a CPU but not all its online SMT
// siblings: containers of that pool would share physical cores with another pool's.
func splitCores(n *Node, topo *topology.Topology) []string {
	var warnings []string
	for _, p := range n.Pools {
		if p.Type != allocation.TypeExclusive {
			continue
		}
		cpus, sibs := map[string][]int{}, map[string][]int{} // by the siblings' pool
		for _, cpu := range p.CPUs.List() {
			for _, sib := range topo.Siblings(cpu).Difference(p.CPUs).List() {
				other, ok := n.PoolOf(sib)
				if !ok { // unused: no container runs there
					continue
				}
				cpus[other.Name] = append(cpus[other.Name], cpu)
				sibs[other.Name] = append(sibs[other.Name], sib)
			}
		}
		for _, other := range sortedKeys(sibs) {
			mine, theirs := cpuset.New(cpus[other]...), cpuset.New(sibs[other]...)
			verb, sib := "share physical cores with their", "SMT sibling"
			if mine.Size() == 1 {
				verb = "shares a physical core with its"
			}
			if theirs.Size() > 1 {
				sib += "s"
			}
			warnings = append(warnings, fmt.Sprintf("pool %q: %s %s %s %s in pool %q, so its containers "+
				"are not alone on their cores; give exclusive pools whole cores", p.Name, cpuNoun(mine), verb, sib, theirs, other))
		}
	}
	return warnings
}
