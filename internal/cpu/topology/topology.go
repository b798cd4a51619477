// Package topology models a node's CPUs: sockets, dies, NUMA nodes, physical cores, SMT threads
// and L3 cache groups. A Topology is plain data, built from a sysfs tree (Discover) or from a
// synthetic spec (Synthetic); its query methods return sets and never touch the system.
//
// Identities: a physical core is named by the lowest CPU ID among its SMT siblings (sysfs
// thread_siblings_list), an L3 group by the lowest CPU ID sharing that cache. Both are unique
// across the node, unlike sysfs core_id, which repeats in every package.
package topology

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// CPU is one online logical CPU (hardware thread).
type CPU struct {
	ID     int `json:"id"`
	Socket int `json:"socket"` // physical_package_id
	Die    int `json:"die"`    // die_id (0 where the kernel has none)
	NUMA   int `json:"numa"`   // NUMA node (0 where the kernel reports none)
	Core   int `json:"core"`   // lowest CPU ID among this CPU's SMT siblings
	L3     int `json:"l3"`     // lowest CPU ID sharing this CPU's L3 cache; Core when no L3 is known
}

// Topology is a node's CPU layout. Only online CPUs have a CPU entry; Offline lists the
// present CPUs that are not online. The zero value is an empty node.
type Topology struct {
	// Source says where the topology came from (a sysfs root or a synthetic spec).
	Source string `json:"source"`
	// CPUs maps each online CPU ID to its placement.
	CPUs map[int]CPU `json:"cpus"`
	// Offline holds CPUs the kernel knows (present/possible) but that are not online.
	Offline cpuset.CPUSet `json:"-"`
	// Isolation is what the host isolated at boot (DiscoverHost, or a synthetic spec).
	Isolation HostIsolation `json:"-"`
}

// Online returns the set of online CPUs.
func (t *Topology) Online() cpuset.CPUSet {
	ids := make([]int, 0, len(t.CPUs))
	for id := range t.CPUs {
		ids = append(ids, id)
	}
	return cpuset.New(ids...)
}

// NumCPUs is the number of online CPUs.
func (t *Topology) NumCPUs() int { return len(t.CPUs) }

// Has reports whether cpu is online.
func (t *Topology) Has(cpu int) bool {
	_, ok := t.CPUs[cpu]
	return ok
}

// filter returns the online CPUs for which keep is true.
func (t *Topology) filter(keep func(CPU) bool) cpuset.CPUSet {
	var ids []int
	for _, c := range t.CPUs {
		if keep(c) {
			ids = append(ids, c.ID)
		}
	}
	return cpuset.New(ids...)
}

// distinct returns the sorted distinct values of key over the CPUs in set (all CPUs when set
// is empty).
func (t *Topology) distinct(set cpuset.CPUSet, key func(CPU) int) []int {
	seen := map[int]bool{}
	for id, c := range t.CPUs {
		if set.Size() == 0 || set.Contains(id) {
			seen[key(c)] = true
		}
	}
	out := make([]int, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// Sockets returns the socket IDs, sorted.
func (t *Topology) Sockets() []int {
	return t.distinct(cpuset.New(), func(c CPU) int { return c.Socket })
}

// NUMANodes returns the NUMA node IDs that hold online CPUs, sorted.
func (t *Topology) NUMANodes() []int {
	return t.distinct(cpuset.New(), func(c CPU) int { return c.NUMA })
}

// Cores returns the physical core IDs, sorted.
func (t *Topology) Cores() []int { return t.distinct(cpuset.New(), func(c CPU) int { return c.Core }) }

// L3Groups returns the L3 group IDs, sorted.
func (t *Topology) L3Groups() []int { return t.distinct(cpuset.New(), func(c CPU) int { return c.L3 }) }

// NUMANodesOf returns the NUMA nodes of the CPUs in set, as a set (for cpuset.mems).
func (t *Topology) NUMANodesOf(set cpuset.CPUSet) cpuset.CPUSet {
	if set.Size() == 0 {
		return cpuset.New()
	}
	return cpuset.New(t.distinct(set, func(c CPU) int { return c.NUMA })...)
}

// CPUsInSocket returns the online CPUs of socket s.
func (t *Topology) CPUsInSocket(s int) cpuset.CPUSet {
	return t.filter(func(c CPU) bool { return c.Socket == s })
}

// CPUsInNUMA returns the online CPUs of NUMA node n.
func (t *Topology) CPUsInNUMA(n int) cpuset.CPUSet {
	return t.filter(func(c CPU) bool { return c.NUMA == n })
}

// CPUsInCore returns the online SMT siblings of physical core core (including itself).
func (t *Topology) CPUsInCore(core int) cpuset.CPUSet {
	return t.filter(func(c CPU) bool { return c.Core == core })
}

// CPUsInL3 returns the online CPUs of L3 group l3.
func (t *Topology) CPUsInL3(l3 int) cpuset.CPUSet {
	return t.filter(func(c CPU) bool { return c.L3 == l3 })
}

// Siblings returns the online SMT siblings of cpu, cpu included; empty if cpu is not online.
func (t *Topology) Siblings(cpu int) cpuset.CPUSet {
	c, ok := t.CPUs[cpu]
	if !ok {
		return cpuset.New()
	}
	return t.CPUsInCore(c.Core)
}

// ThreadsPerCore is the largest number of online threads on one physical core (1 without SMT).
func (t *Topology) ThreadsPerCore() int {
	count := map[int]int{}
	most := 0
	for _, c := range t.CPUs {
		count[c.Core]++
		if count[c.Core] > most {
			most = count[c.Core]
		}
	}
	return most
}

// SMT reports whether any physical core has more than one online thread.
func (t *Topology) SMT() bool { return t.ThreadsPerCore() > 1 }

// Placement describes where a CPU sits, for humans: "s0/n1/c12".
func (t *Topology) Placement(cpu int) string {
	c, ok := t.CPUs[cpu]
	if !ok {
		return "offline"
	}
	return fmt.Sprintf("s%d/n%d/c%d", c.Socket, c.NUMA, c.Core)
}

// Summary is a one-line description: "2 sockets, 4 NUMA nodes, 64 cores, 128 CPUs (SMT2), 8 L3 groups".
func (t *Topology) Summary() string {
	s := fmt.Sprintf("%s, %s, %s, %s", count(len(t.Sockets()), "socket"),
		count(len(t.NUMANodes()), "NUMA node"), count(len(t.Cores()), "core"), count(t.NumCPUs(), "CPU"))
	if t.SMT() {
		s += fmt.Sprintf(" (SMT%d)", t.ThreadsPerCore())
	} else {
		s += " (no SMT)"
	}
	s += ", " + count(len(t.L3Groups()), "L3 group")
	if t.Offline.Size() > 0 {
		s += fmt.Sprintf(", offline %s", t.Offline)
	}
	return s
}

// count is "1 core", "2 cores".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
