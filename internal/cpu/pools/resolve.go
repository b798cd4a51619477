package pools

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Select returns the config whose nodeSelector matches nodeLabels: every selector label must
// be on the node with the same value (Kubernetes nodeSelector semantics), and an empty
// selector matches every node. Exactly one config must match.
func Select(configs []*Config, nodeLabels map[string]string) (*Config, error) {
	if len(configs) == 0 {
		return nil, errors.New("no pool configs to select from")
	}
	var matched []string
	var found *Config
	for _, c := range configs {
		if selects(c.NodeSelector, nodeLabels) {
			matched = append(matched, c.Source)
			found = c
		}
	}
	switch len(matched) {
	case 1:
		return found, nil
	case 0:
		return nil, noMatch(configs, nodeLabels)
	}
	return nil, fmt.Errorf("more than one pool config matches this node: %s (give them nodeSelectors that match different nodes)",
		strings.Join(matched, ", "))
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// noMatch names the node's values of the labels the selectors use, and each selector.
func noMatch(configs []*Config, labels map[string]string) error {
	used := map[string]bool{}
	var wants []string
	for _, c := range configs {
		var sel []string
		for _, k := range sortedKeys(c.NodeSelector) {
			used[k] = true
			sel = append(sel, k+"="+c.NodeSelector[k])
		}
		wants = append(wants, c.Source+" wants "+strings.Join(sel, ", "))
	}
	var have []string
	for _, k := range sortedKeys(used) {
		if v, ok := labels[k]; ok {
			have = append(have, k+"="+v)
		} else {
			have = append(have, k+" unset")
		}
	}
	return fmt.Errorf("no pool config matches this node (node labels: %s): %s",
		strings.Join(have, ", "), strings.Join(wants, "; "))
}

// Resolve checks cfg against the node's topology and returns the node's pools. Every pool
// CPU must be present. A pool with offline CPUs runs degraded on its online ones (Offline
// lists the others, and a warning says so); it is not refused, so that a node with CPUs
// taken offline still runs its agent. Online CPUs that no pool names join the default pool
// (one named "default" is made if cfg declares none), which must not end up empty. A
// warning is added for each exclusive pool that shares physical cores with another pool.
func Resolve(cfg *Config, topo *topology.Topology) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	online := topo.Online()
	if err := cfg.checkNode(online.Union(topo.Offline)); err != nil {
		return nil, err
	}
	n := &Node{Source: cfg.Source, Config: cfg, Unpooled: online, Offline: map[string]cpuset.CPUSet{}}
	n.Default = Pool{Name: DefaultPoolName, CPUs: cpuset.New(), HTPolicy: SingleThreaded}
	for _, p := range cfg.Pools {
		if off := p.CPUs.Difference(online); !off.IsEmpty() {
			n.Offline[p.Name] = off
			p.CPUs = p.CPUs.Intersection(online)
			n.Warnings = append(n.Warnings, fmt.Sprintf("pool %q runs degraded: %s offline; it has %s",
				p.Name, cpusAre(off), orNone(p.CPUs)))
		}
		n.Unpooled = n.Unpooled.Difference(p.CPUs)
		if p.Type = TypeOf(p.Name); p.Type == allocation.TypeDefault {
			n.Default = p
		} else {
			n.Pools = append(n.Pools, p)
		}
	}
	n.Default.Type = allocation.TypeDefault
	n.Default.CPUs = n.Default.CPUs.Union(n.Unpooled)
	if n.Default.CPUs.IsEmpty() {
		return nil, &ConfigError{Source: cfg.Source, Field: "pools", Reason: fmt.Sprintf(
			"no CPU is left for the default pool: every online CPU (%s) is in an exclusive or shared pool, "+
				"but pod sandboxes and containers that ask for no pool need CPUs to run on; "+
				"add a pool named %q or leave some CPUs out of the other pools", online, DefaultPoolName)}
	}
	n.Pools = append(n.Pools, n.Default)
	sort.Slice(n.Pools, func(i, j int) bool { return n.Pools[i].Name < n.Pools[j].Name })
	if !n.Unpooled.IsEmpty() {
		verb := "are in no pool: they join"
		if n.Unpooled.Size() == 1 {
			verb = "is in no pool: it joins"
		}
		n.Warnings = append(n.Warnings, fmt.Sprintf("%s %s the default pool %q",
			cpuNoun(n.Unpooled), verb, n.Default.Name))
	}
	n.Warnings = append(n.Warnings, splitCores(n, topo)...)
	return n, nil
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
				other, _ := n.PoolOf(sib) // every online CPU is in a pool
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
