package status

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// WriteText prints r for people: the node and its kernel features, each pool drawn as a
// grid of its CPUs with who holds each thread, and a row per container.
func WriteText(w io.Writer, r Report) error {
	ew := &errWriter{w: w}
	name := r.Node
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(ew, "Node %s: %s\n", name, r.Topology.Summary)
	if r.Topology.Isolation != nil {
		fmt.Fprintf(ew, "Host isolation: %s\n", r.Topology.Isolation.Summary())
	}
	from := r.Source
	if r.Source == "agent" {
		from += map[bool]string{true: " (ready)", false: " (not ready: not synchronised by the runtime yet)"}[r.Ready]
	}
	fmt.Fprintf(ew, "From: %s at %s\n", from, r.Time.UTC().Format("2006-01-02 15:04:05Z"))
	if r.PoolConfig != "" {
		fmt.Fprintf(ew, "Pool config: %s\n", r.PoolConfig)
	}
	if p := r.PendingPoolConfig; p != nil {
		fmt.Fprintf(ew, "Pending pool config: %s, since %s, waits for %d running container(s) to end:\n",
			p.Source, p.Since.UTC().Format("2006-01-02 15:04:05Z"), len(p.Blocking))
		for _, b := range p.Blocking {
			fmt.Fprintf(ew, "  %s/%s %s: %s\n", b.Namespace, b.Pod, b.Container, b.Reason)
		}
	}
	writeKernel(ew, r.Kernel)
	if err := writePools(ew, r); err != nil {
		return err
	}
	writeContainers(ew, r.Containers)
	if err := writeIsolation(ew, &r); err != nil {
		fmt.Fprintf(ew, "\nIsolation: %v\n", err)
	}
	var other []string
	for _, n := range slices.Sorted(maps.Keys(r.Extensions)) {
		if n != SectionEPC && n != SectionCoreSched && n != SectionIsolation {
			other = append(other, n)
		}
	}
	if len(other) > 0 {
		fmt.Fprintf(ew, "\nMore from extensions %s: see -o json.\n", strings.Join(other, ", "))
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(ew, "\nWarnings:")
		for _, s := range r.Warnings {
			fmt.Fprintf(ew, "  %s\n", s)
		}
	}
	return ew.err
}

func writeKernel(w io.Writer, k Kernel) {
	fmt.Fprintln(w, "\nKernel")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	yes := func(f Feature) string { return map[bool]string{true: "yes", false: "no"}[f.Available] }
	epc := k.SGXEPC.Detail
	if k.SGXEPC.Available && k.EPCCapacityBytes > 0 {
		epc = strings.TrimSpace("capacity " + iec(k.EPCCapacityBytes) + " " + epc)
	}
	cg := strings.TrimSpace("driver " + orUnknown(k.Cgroup.Driver) + " " + k.Cgroup.Detail)
	fmt.Fprintf(tw, "  SMT\t%s\t%s\n", yes(k.SMT), k.SMT.Detail)
	fmt.Fprintf(tw, "  core scheduling\t%s\t%s\n", yes(k.CoreScheduling), k.CoreScheduling.Detail)
	fmt.Fprintf(tw, "  cgroup\t%s\t%s\n", k.Cgroup.Version, cg)
	fmt.Fprintf(tw, "  misc/sgx_epc\t%s\t%s\n", yes(k.SGXEPC), epc)
	_ = tw.Flush()
}

func writePools(w io.Writer, r Report) error {
	fmt.Fprintf(w, "\nPools\n  %s\n", gridLegend)
	for _, p := range r.Pools {
		cpus, err := topology.ParseCPUList(p.CPUs)
		if err != nil {
			return fmt.Errorf("pool %s: cpus %q: %w", p.Name, p.CPUs, err)
		}
		fmt.Fprintf(w, "\n%s: %s\n", p.Name, poolSummary(p, cpus))
		if p.Offline != "" {
			fmt.Fprintf(w, "  DEGRADED: CPUs %s are offline (held allocations keep them; none is handed out)\n", p.Offline)
		}
		var users []string
		for _, c := range r.Containers {
			if c.SharedPool == p.Name || (c.Pool == p.Name && c.Type == allocation.TypeDefault) {
				users = append(users, shareOf(c))
			}
		}
		if p.Type != allocation.TypeExclusive {
			m := map[bool]string{true: markShared, false: markFree}[len(users) > 0]
			writeGrid(w, r.Topology, cpus, func(int) string { return m })
			if len(users) > 0 {
				writeLegend(w, []string{list(users, 8)})
			}
			continue
		}
		hs := holders(p, r.Containers)
		idled, _ := topology.ParseCPUList(p.Idled)
		writeGrid(w, r.Topology, cpus, func(cpu int) string {
			for _, h := range hs {
				if h.cpus.Contains(cpu) {
					return h.tag
				}
			}
			if idled.Contains(cpu) {
				return markIdled
			}
			return markFree
		})
		var legend []string
		for _, h := range hs {
			legend = append(legend, h.tag+"="+shortName(h.ctr))
		}
		writeLegend(w, legend)
	}
	return nil
}

// poolSummary is the pool's use in one line: "exclusive, multiThreaded, CPUs 4-7: 3 of 4
// given, 2 containers".
func poolSummary(p Pool, cpus cpuset.CPUSet) string {
	s := string(p.Type)
	if p.HTPolicy != "" {
		s += ", " + p.HTPolicy
	}
	s += fmt.Sprintf(", CPUs %s: ", orDash(p.CPUs))
	switch p.Type {
	case allocation.TypeExclusive:
		given, _ := topology.ParseCPUList(p.Allocated)
		idled, _ := topology.ParseCPUList(p.Idled)
		s += fmt.Sprintf("%d of %d given", given.Size(), cpus.Size())
		if idled.Size() > 0 {
			s += fmt.Sprintf(", %d idled", idled.Size())
		}
		s += ", "
	case allocation.TypeShared:
		s += fmt.Sprintf("%d of %d millicpu granted (%d%%), ", p.MilliCPUGranted, p.MilliCPUCapacity,
			plan.Percent(p.MilliCPUGranted, p.MilliCPUCapacity))
	}
	s += containers(p.Containers)
	if p.HostIsolated != "" || p.IsolatedCPUs != "" {
		s += ", host-isolated " + orNone(p.HostIsolated)
	}
	if p.IsolatedCPUs != "" {
		s += " (isolatedCPUs: " + p.IsolatedCPUs + ")"
	}
	return s
}

// shareOf names a container on a shared or default pool, with its share.
func shareOf(c Container) string {
	if c.MilliCPU > 0 {
		return fmt.Sprintf("%s %dm", shortName(c), c.MilliCPU)
	}
	return shortName(c)
}

func writeContainers(w io.Writer, ctrs []Container) {
	fmt.Fprintln(w, "\nContainers")
	if len(ctrs) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  POD\tCONTAINER\tPOOL\tCPUS\tIDLED\tGROUP\tEPC LIMIT\tEPC USED")
	for _, c := range ctrs {
		limit, used := "-", "-"
		if e := c.EPC; e != nil {
			if e.LimitBytes > 0 {
				limit = iec(e.LimitBytes)
				if !e.InForce {
					limit += " (not enforced)"
				}
			}
			if e.UsageBytes != nil {
				used = iec(*e.UsageBytes)
			}
		}
		fmt.Fprintf(tw, "  %s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Namespace, c.Pod, c.Container, poolLabel(c),
			orDash(c.CPUs), orDash(c.Idled), group(c), limit, used)
	}
	_ = tw.Flush()
}

// group is the container's core-scheduling group, with its cookie state unless the cookie
// is as asked (ok, or none for the group "none").
func group(c Container) string {
	if c.CookieState == "" || c.CookieState == "ok" || c.CookieState == "none" {
		return orDash(c.Group)
	}
	return fmt.Sprintf("%s (%s)", orDash(c.Group), c.CookieState)
}

func poolLabel(c Container) string {
	switch {
	case c.Pool == "":
		return "-"
	case c.Type == allocation.TypeExclusive && c.MilliCPU > 0:
		return fmt.Sprintf("%s + %s (%dm)", c.Pool, c.SharedPool, c.MilliCPU)
	case c.Type == allocation.TypeShared:
		return fmt.Sprintf("%s (%dm)", c.Pool, c.MilliCPU)
	}
	return c.Pool
}

// iec prints n in binary units: 512, 64Mi, 1.5Gi.
func iec(n uint64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10) + units[i]
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}

func containers(n int) string {
	if n == 1 {
		return "1 container"
	}
	return fmt.Sprintf("%d containers", n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// errWriter keeps the first write error, so the printing code need not check each one.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
