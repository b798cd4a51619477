package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// WriteText prints the report for people: one row per container, a utilisation line per
// pool, then refusals and warnings.
func (n *Node) WriteText(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Node: %s\n", n.Topology.Summary())
	if iso := n.Topology.Isolation; iso.Any() {
		fmt.Fprintf(tw, "Host isolation: %s\n", iso.Summary())
	}
	fmt.Fprintf(tw, "Pool config: %s\n\n", n.Pools.Source)
	fmt.Fprintln(tw, "POD\tCONTAINER\tPOOL\tCPUS\tPLACEMENT\tMEMS\tCFS QUOTA\tENV")
	for _, p := range rep.Placed {
		d := p.Decision
		name := p.Container
		switch {
		case p.Init:
			name += " (init)"
		case p.Sidecar:
			name += " (sidecar)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Pod, name, poolLabel(d.Allocation),
			d.CPUs, n.placement(d), d.Mems, quota(d), envText(d.Env))
	}
	fmt.Fprintln(tw, "\nPOOL\tTYPE\tCPUS\tUSE")
	for _, u := range rep.Usage {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\n", u.Pool, u.Type, u.CPUs, usageText(u), n.isolatedText(u.Pool))
	}
	if unused := n.Pools.Unused; !unused.IsEmpty() {
		fmt.Fprintf(tw, "(no pool)\t-\t%s\tunused: no container runs there (unpooledCPUs: default gives them to the default pool)\n", unused)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Refusals) > 0 {
		fmt.Fprintln(w, "\nRefused:")
		for _, r := range rep.Refusals {
			c := ""
			if r.Container != "" {
				c = fmt.Sprintf(" container %q", r.Container)
			}
			fmt.Fprintf(w, "  pod %s%s (%s): %s\n", r.Pod, c, r.Code, r.Reason)
		}
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, s := range rep.Warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	return nil
}

// isolatedText names an exclusive pool's CPUs the host isolated and its isolatedCPUs.
func (n *Node) isolatedText(pool string) string {
	p, ok := n.Pools.Pool(pool)
	if !ok || p.HostIsolated.IsEmpty() && p.Isolation.IsolatedCPUs == "" {
		return ""
	}
	s := "; host-isolated " + p.HostIsolated.String()
	if p.HostIsolated.IsEmpty() {
		s = "; host-isolated none"
	}
	if c := p.Isolation.IsolatedCPUs; c != "" {
		s += " (isolatedCPUs: " + string(c) + ")"
	}
	return s
}

func poolLabel(a allocation.Allocation) string {
	if a.Type == allocation.TypeExclusive {
		s := strings.Join(a.ExclusivePools(), " + ")
		if a.MilliCPU > 0 {
			s += fmt.Sprintf(" + %s (%dm)", a.SharedPool, a.MilliCPU)
		}
		return s
	}
	if a.Type == allocation.TypeShared {
		return fmt.Sprintf("%s (%dm)", a.Pool, a.MilliCPU)
	}
	return a.Pool
}

// placement describes exclusive CPUs by NUMA node and core ("n0: c4{4,20} c5{5,21}") and
// names the siblings a singleThreaded pool idles; other pools by their NUMA nodes.
func (n *Node) placement(d Decision) string {
	a := d.Allocation
	if a.Type != allocation.TypeExclusive {
		return "whole pool"
	}
	byNUMA := map[int]map[int][]int{}
	for _, id := range a.CPUs.List() {
		c := n.Topology.CPUs[id]
		if byNUMA[c.NUMA] == nil {
			byNUMA[c.NUMA] = map[int][]int{}
		}
		byNUMA[c.NUMA][c.Core] = append(byNUMA[c.NUMA][c.Core], id)
	}
	var parts []string
	for _, numa := range sortedKeys(byNUMA) {
		cores := byNUMA[numa]
		var cs []string
		for _, core := range sortedKeys(cores) {
			ids := cpuset.New(cores[core]...)
			mark := ""
			if !n.Topology.CPUsInCore(core).IsSubsetOf(a.Held()) {
				mark = "½"
			}
			cs = append(cs, fmt.Sprintf("c%d{%s}%s", core, commaList(ids), mark))
		}
		parts = append(parts, fmt.Sprintf("n%d: %s", numa, strings.Join(cs, " ")))
	}
	s := strings.Join(parts, "; ")
	if a.Idled.Size() > 0 {
		s += fmt.Sprintf("; idles %s", a.Idled)
	}
	return s
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

func quota(d Decision) string {
	if d.Quota == 0 {
		return "-"
	}
	if d.QuotaRaised {
		return fmt.Sprintf("%d/%dµs (kernel minimum)", d.Quota, d.Period)
	}
	return fmt.Sprintf("%d/%dµs", d.Quota, d.Period)
}

func envText(env []EnvVar) string {
	if len(env) == 0 {
		return "-"
	}
	parts := make([]string, len(env))
	for i, e := range env {
		parts[i] = e.Name + "=" + e.Value
	}
	return strings.Join(parts, " ")
}

func usageText(u PoolUsage) string {
	switch u.Type {
	case allocation.TypeExclusive:
		s := fmt.Sprintf("%d/%d CPUs held (%d%%), %s", u.Held, u.Size, Percent(int64(u.Held), int64(u.Size)), containers(u.Containers))
		if u.Idled > 0 {
			s += ", " + plural(u.Idled, "idled sibling")
		}
		return s
	case allocation.TypeShared:
		return fmt.Sprintf("%d/%d millicpu granted (%d%%), %s", u.MilliCPU, u.Capacity, Percent(u.MilliCPU, u.Capacity), containers(u.Containers))
	}
	return fmt.Sprintf("%s on %s, with every pod sandbox", containers(u.Containers), plural(u.Size, "CPU"))
}

func containers(n int) string { return plural(n, "container") }

// plural is "1 container", "2 containers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Percent is a as a whole percentage of b, rounded down; 0 when b is 0.
func Percent(a, b int64) int64 {
	if b == 0 {
		return 0
	}
	return a * 100 / b
}
