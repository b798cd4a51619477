package pools

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// offDomain takes the CPUs the kernel does not load balance (domain: isolcpus= without flags
// or with domain) out of default or shared pool p, into Unused, with a warning: a container
// there would never be migrated off a busy CPU. A pool left empty is an error naming the fix.
func (n *Node) offDomain(p Pool, domain cpuset.CPUSet) (Pool, error) {
	out := p.CPUs.Intersection(domain)
	if out.IsEmpty() {
		return p, nil
	}
	had := p.CPUs
	p.CPUs = p.CPUs.Difference(domain)
	n.Unused = n.Unused.Union(out)
	if p.CPUs.IsEmpty() {
		return p, &ConfigError{Source: n.Source, Pool: p.Name, Field: "cpus", Value: had.String(), Reason: fmt.Sprintf(
			"every CPU of this %s pool is isolated from the kernel's load balancing (isolcpus=, domain: %s), where a "+
				"container would never be migrated off a busy CPU; give the pool CPUs outside isolcpus= (isolated CPUs "+
				"belong in an exclusive pool), or boot with isolcpus=nohz,managed_irq,<cpus>, which keeps load balancing",
			p.Type, domain)}
	}
	n.Warnings = append(n.Warnings, fmt.Sprintf("pool %q: %s isolated from the kernel's load balancing (isolcpus=): "+
		"left out of the pool (no container runs there), as a container on them would never be migrated off a busy "+
		"CPU; put them in an exclusive pool", p.Name, cpusAre(out)))
	return p, nil
}

// hostIsolationWarnings warns about exclusive pools that mix CPUs the host isolated with
// others, and about isolatedCPUs set on a pool the host isolated none of.
func hostIsolationWarnings(n *Node) []string {
	var out []string
	for _, p := range n.Pools {
		if p.Type != allocation.TypeExclusive {
			continue
		}
		iso, other := p.HostIsolated, p.CPUs.Difference(p.HostIsolated)
		switch want := p.Isolation.IsolatedCPUs; {
		case iso.IsEmpty() && want == RequireIsolated:
			out = append(out, fmt.Sprintf("pool %q: isolatedCPUs: require, but the host isolated none of its CPUs (isolcpus=, "+
				"nohz_full=): every request for it is refused", p.Name))
		case iso.IsEmpty() && want == PreferIsolated:
			out = append(out, fmt.Sprintf("pool %q: isolatedCPUs: prefer, but the host isolated none of its CPUs (isolcpus=, "+
				"nohz_full=): it hands out the others", p.Name))
		case !iso.IsEmpty() && !other.IsEmpty():
			how := map[IsolatedCPUs]string{
				"":              "set isolatedCPUs: prefer or require, or give the pool CPUs of one kind",
				PreferIsolated:  "isolatedCPUs: prefer hands out the isolated ones first",
				RequireIsolated: "isolatedCPUs: require hands out only the isolated ones, the others stay idle",
			}[want]
			out = append(out, fmt.Sprintf("pool %q mixes CPUs the host isolated (%s: isolcpus=, nohz_full=) with others (%s): "+
				"a container's isolation depends on which it is given; %s", p.Name, iso, other, how))
		}
	}
	return out
}
