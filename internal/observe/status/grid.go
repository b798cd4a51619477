package status

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Marks in a pool's grid besides the holders' tags.
const (
	markFree   = "."
	markIdled  = "~"
	markShared = "*"
	markOther  = "x"
	gridCols   = 16 // cores per line
)

// gridLegend explains the marks; it is printed once above the pools.
const gridLegend = "a column per core, a row per SMT thread; each CPU shows its holder's letter,\n  " +
	markIdled + " an idled sibling, " + markShared + " shared by the pool's containers, " + markFree + " free, " +
	markOther + " a thread of another pool"

// holder is a container's tag in an exclusive pool's grid.
type holder struct {
	tag  string
	ctr  Container
	cpus cpuset.CPUSet
}

// writeGrid draws pool's CPUs by socket and NUMA node, a column per core, with the mark of
// each thread from mark.
func writeGrid(w io.Writer, topo Topology, pool cpuset.CPUSet, mark func(cpu int) string) {
	type group struct{ socket, numa int }
	cores := map[group]map[int][]int{} // group → core → CPUs
	inPool := map[int]bool{}
	for _, c := range topo.CPUs {
		if pool.Contains(c.ID) {
			inPool[c.Core] = true
		}
	}
	for _, c := range topo.CPUs {
		if !inPool[c.Core] {
			continue
		}
		g := group{c.Socket, c.NUMA}
		if cores[g] == nil {
			cores[g] = map[int][]int{}
		}
		cores[g][c.Core] = append(cores[g][c.Core], c.ID)
	}
	groups := slices.SortedFunc(maps.Keys(cores), func(a, b group) int {
		return cmp.Or(cmp.Compare(a.socket, b.socket),
			cmp.Compare(a.numa, b.numa))
	})
	idw := len(fmt.Sprint(slices.MaxFunc(topo.CPUs, func(a, b topology.CPU) int { return cmp.Compare(a.ID, b.ID) }).ID))
	markw := 1
	for _, c := range topo.CPUs {
		if pool.Contains(c.ID) {
			markw = max(markw, len(mark(c.ID)))
		}
	}
	for _, g := range groups {
		ids := slices.Sorted(maps.Keys(cores[g]))
		threads := 0
		for _, core := range ids {
			slices.Sort(cores[g][core])
			threads = max(threads, len(cores[g][core]))
		}
		for start := 0; start < len(ids); start += gridCols {
			row := ids[start:min(start+gridCols, len(ids))]
			label := fmt.Sprintf("socket %d NUMA %d", g.socket, g.numa)
			if start > 0 {
				label = ""
			}
			line := fmt.Sprintf("  %-16s core", label)
			for _, core := range row {
				line += fmt.Sprintf(" %*d%*s", idw, core, markw, "")
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
			for t := range threads {
				line = fmt.Sprintf("  %-16s   t%d", "", t)
				for _, core := range row {
					cpus := cores[g][core]
					if t >= len(cpus) {
						line += fmt.Sprintf(" %*s", idw+markw, "")
						continue
					}
					m := markOther
					if pool.Contains(cpus[t]) {
						m = mark(cpus[t])
					}
					line += fmt.Sprintf(" %*d%-*s", idw, cpus[t], markw, m)
				}
				fmt.Fprintln(w, strings.TrimRight(line, " "))
			}
		}
	}
}

// holders tags the containers with exclusive CPUs in pool p, in the order of their first
// CPU: A … Z, then AA, AB, ….
func holders(p Pool, ctrs []Container) []holder {
	var out []holder
	for _, c := range ctrs {
		if c.Pool != p.Name || c.Type != allocation.TypeExclusive {
			continue
		}
		cpus, err := topology.ParseCPUList(c.Exclusive)
		if err != nil || cpus.IsEmpty() {
			continue
		}
		out = append(out, holder{ctr: c, cpus: cpus})
	}
	slices.SortFunc(out, func(a, b holder) int { return cmp.Compare(a.cpus.List()[0], b.cpus.List()[0]) })
	for i := range out {
		out[i].tag = tag(i)
	}
	return out
}

func tag(i int) string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	if i < len(letters) {
		return letters[i : i+1]
	}
	return tag(i/len(letters)-1) + letters[i%len(letters):i%len(letters)+1]
}

// abbrev shortens s to at most n runes, marking the cut with "…".
func abbrev(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// shortName is "pod/container", each part abbreviated, with the namespace when it is not
// "default".
func shortName(c Container) string {
	s := abbrev(c.Pod, 24) + "/" + abbrev(c.Container, 16)
	if c.Namespace != "" && c.Namespace != "default" {
		s = abbrev(c.Namespace, 16) + "/" + s
	}
	return s
}

// writeLegend lists the items, indented, wrapped at about 100 columns.
func writeLegend(w io.Writer, items []string) {
	line := ""
	for _, it := range items {
		if line != "" && len(line)+len(it) > 100 {
			fmt.Fprintln(w, line)
			line = ""
		}
		line += "  " + it
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

// list is items joined by ", ", at most n of them, then "… and N more".
func list(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" … and %d more", len(items)-n)
}
