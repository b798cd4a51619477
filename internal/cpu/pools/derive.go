package pools

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// The pools of a derived layout, named as in example/poolconfig-example.yaml, whose pods ask
// for them by these names.
const (
	DerivedShared    = "shared_caas"  // fractional shares
	DerivedDataPlane = "exclusive_dp" // whole CPUs, multiThreaded
	DerivedRealTime  = "exclusive_rt" // one thread per core, singleThreaded
)

// derivedPools are the pools of a derived layout in the order cores go to them when there are
// too few for all.
var derivedPools = []string{DefaultPoolName, DerivedShared, DerivedDataPlane, DerivedRealTime}

// Derive returns a pool config for topo in the spirit of example/poolconfig-example.yaml
// (exclusiveCPUs: threads; every pool holds whole physical cores, all their online threads).
// Cores are taken in NUMA node order, then by ID; those with a CPU the host isolated (isolcpus=,
// nohz_full=: topo.Isolation.Isolated) are set apart. Of the others (C of them, K0 on the first
// NUMA node that has any, KL on the last):
//   - default: the first max(1, min(⌈C/8⌉, ⌊K0/4⌋)) cores;
//   - shared_caas: as many after them;
//   - exclusive_rt (singleThreaded): the cores the host isolated, or if it isolated none the
//     last max(1, min(⌈C/4⌉, ⌊KL/2⌋)) cores, on the last NUMA node;
//   - exclusive_dp (multiThreaded): the cores in between, on every NUMA node.
//
// A node with too few cores for all of them gets as many as fit, in the order default,
// shared_caas, exclusive_dp, exclusive_rt (one core: default alone); a warning names the pools
// left out. CPUs the host isolated are never in the default or shared pool: when every core
// has some, the default pool takes the others of the first core that has others (exclusive_rt
// the rest), and a warning says so. On the example's node (2 sockets × 8 cores × 2 threads) it is
// poolconfig-example.yaml's layout. The config has no nodeSelector; Source names it.
//
// Derive is pure and deterministic. It fails only when every online CPU is out of the kernel's
// load balancing (isolcpus= domain), which the kernel does not allow.
func Derive(topo *topology.Topology, source string) (*Config, error) {
	if topo.NumCPUs() == 0 {
		return nil, errors.New("derive a pool layout: the node has no online CPU")
	}
	threads := map[int][]int{} // core → its online threads
	for id, c := range topo.CPUs {
		threads[c.Core] = append(threads[c.Core], id)
	}
	isolated := topo.Isolation.Isolated()
	var plain, apart []int // cores without and with CPUs the host isolated
	for _, core := range coresByNUMA(topo, threads) {
		if cpuset.New(threads[core]...).Intersection(isolated).IsEmpty() {
			plain = append(plain, core)
		} else {
			apart = append(apart, core)
		}
	}
	cfg := &Config{Source: source, ExclusiveCPUs: Threads, UnpooledCPUs: Unused, SelectorMatch: AnyLabel}
	cores := map[string][]int{}
	var spare cpuset.CPUSet // isolated CPUs of a core the default pool shares (when no core is plain)
	if len(plain) == 0 {
		i, def, warn, err := housekeeping(topo, apart, threads)
		if err != nil {
			return nil, fmt.Errorf("derive a pool layout: %w", err)
		}
		cfg.Pools = append(cfg.Pools, Pool{Name: DefaultPoolName, Type: TypeOf(DefaultPoolName), CPUs: def,
			HTPolicy: SingleThreaded, API: DevicePlugin})
		spare = cpuset.New(threads[apart[i]]...).Difference(def)
		apart = append(apart[:i:i], apart[i+1:]...)
		cfg.Warnings = append(cfg.Warnings, warn)
	} else {
		cores = split(topo, plain, len(apart) > 0)
	}
	cores[DerivedRealTime] = append(cores[DerivedRealTime], apart...)
	for _, name := range derivedPools {
		cpus := cpuset.New()
		for _, core := range cores[name] {
			cpus = cpus.Union(cpuset.New(threads[core]...))
		}
		if name == DerivedRealTime {
			cpus = cpus.Union(spare)
		}
		if cpus.IsEmpty() {
			continue
		}
		p := Pool{Name: name, Type: TypeOf(name), CPUs: cpus, HTPolicy: SingleThreaded, API: DevicePlugin}
		if name == DerivedDataPlane {
			p.HTPolicy = MultiThreaded
		}
		if name == DerivedRealTime && !cpus.Intersection(isolated).IsEmpty() {
			p.Isolation.IsolatedCPUs = PreferIsolated
		}
		cfg.Pools = append(cfg.Pools, p)
	}
	sort.Slice(cfg.Pools, func(i, j int) bool { return cfg.Pools[i].Name < cfg.Pools[j].Name })
	if left := leftOut(cfg); len(left) > 0 {
		few := fmt.Sprintf("this node's %s (%s) %s", count(len(threads), "core"), count(topo.NumCPUs(), "CPU"), verb(len(threads)))
		if len(apart) > 0 || !spare.IsEmpty() {
			few = fmt.Sprintf("this node's %s without a CPU the host isolated %s", count(len(plain), "core"), verb(len(plain)))
		}
		them := "them"
		if len(left) == 1 {
			them = "it"
		}
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("%s too few for %s %s: pods that ask for %s are refused",
			few, noun(len(left), "pool"), strings.Join(left, ", "), them))
	}
	return cfg, nil
}

// coresByNUMA returns the cores in NUMA node order, then by ID.
func coresByNUMA(topo *topology.Topology, threads map[int][]int) []int {
	out := make([]int, 0, len(threads))
	for core := range threads {
		out = append(out, core)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := topo.CPUs[out[i]].NUMA, topo.CPUs[out[j]].NUMA
		return a < b || a == b && out[i] < out[j]
	})
	return out
}

// split shares plain (cores in NUMA order, none isolated) out between the pools (see Derive).
// With isolated set, exclusive_rt gets the isolated cores and none of plain.
func split(topo *topology.Topology, plain []int, isolated bool) map[string][]int {
	numa := func(core int) int { return topo.CPUs[core].NUMA }
	onNUMA := func(n int) (k int) {
		for _, core := range plain {
			if numa(core) == n {
				k++
			}
		}
		return k
	}
	c := len(plain)
	d := max(1, min(ceilDiv(c, 8), onNUMA(numa(plain[0]))/4))
	r := max(1, min(ceilDiv(c, 4), onNUMA(numa(plain[c-1]))/2))
	if isolated {
		r = 0
	}
	def := min(d, c)
	shared := min(d, c-def)
	rt := min(r, max(0, c-def-shared-1)) // exclusive_dp comes first: one core at least
	dp := c - def - shared - rt
	return map[string][]int{
		DefaultPoolName:  plain[:def],
		DerivedShared:    plain[def : def+shared],
		DerivedDataPlane: plain[def+shared : def+shared+dp],
		DerivedRealTime:  plain[c-rt:],
	}
}

// housekeeping picks the default pool's CPUs on a node where every core has a CPU the host
// isolated: of the first core (cores[i]) with CPUs the host did not isolate, those; else of the
// first with CPUs the kernel still balances, those. The warning says so.
func housekeeping(topo *topology.Topology, cores []int, threads map[int][]int) (i int, def cpuset.CPUSet, warn string, err error) {
	for _, out := range []cpuset.CPUSet{topo.Isolation.Isolated(), topo.Isolation.Domain} {
		for i, core := range cores {
			all := cpuset.New(threads[core]...)
			if def = all.Difference(out); def.IsEmpty() {
				continue
			}
			warn = fmt.Sprintf("the host isolated a CPU of every core (isolcpus=, nohz_full=): the default pool has "+
				"core %d's CPUs %s, and pool %q its others", core, def, DerivedRealTime)
			if !def.Intersection(topo.Isolation.Isolated()).IsEmpty() {
				warn = fmt.Sprintf("the host isolated every CPU (isolcpus=, nohz_full=): the default pool has core %d's "+
					"CPUs %s, which the kernel still balances", core, def)
			}
			return i, def, warn, nil
		}
	}
	return 0, def, "", fmt.Errorf("no CPU for the default pool: every online CPU is out of the kernel's load balancing "+
		"(isolcpus= domain %s), and pod sandboxes need CPUs it balances; leave one out of isolcpus= (the kernel keeps "+
		"its boot CPU)", topo.Isolation.Domain)
}

// leftOut names the derived pools cfg lacks.
func leftOut(cfg *Config) []string {
	var out []string
	for _, name := range derivedPools {
		found := false
		for _, p := range cfg.Pools {
			found = found || p.Name == name
		}
		if !found {
			out = append(out, name)
		}
	}
	return out
}

// count is "1 core", "2 cores".
func count(n int, word string) string { return fmt.Sprintf("%d %s", n, noun(n, word)) }

// noun is word, plural unless n is 1.
func noun(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// verb is "is" for 1, else "are".
func verb(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
