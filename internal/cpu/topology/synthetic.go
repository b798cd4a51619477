package topology

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// maxSyntheticCPUs caps the CPU count of a synthetic topology (Linux's largest NR_CPUS).
const maxSyntheticCPUs = MaxCPUID + 1

// synthKeys are the spec keys, in the order they are checked and listed in errors.
const synthKeys = "sockets, numa, cores, threads, l3, numbering, offline, isolcpus, nohz_full or rcu_nocbs"

// listKeys are the spec keys whose value is a list with commas: entries without "=" go on it.
var listKeys = []string{"offline", "isolcpus", "nohz_full", "rcu_nocbs"}

// Synthetic builds a Topology from a spec of comma-separated key=value pairs, for tests,
// dry runs and machines no lab has:
//
//	cores=N       physical cores per socket (required)
//	sockets=N     sockets, 1 to 64 (default 1)
//	numa=N        NUMA nodes in total, a multiple of sockets that splits each socket's cores
//	              evenly (default: one per socket)
//	threads=N     SMT threads per core, 1 to 8 (default 1)
//	l3=N          L3 groups per NUMA node, dividing its cores evenly (default 1)
//	numbering=M   apart (default): thread t of core c is CPU t*totalCores+c, as on Intel Linux;
//	              adjacent: CPU c*threads+t, as on many AMD machines
//	offline=LIST  CPUs that are present but offline, a Linux CPU list ("offline=6-7,9")
//	isolcpus=V, nohz_full=LIST, rcu_nocbs=LIST
//	              the host's isolation (Isolation), as on a kernel command line:
//	              "isolcpus=managed_irq,domain,2-7,10-15"
//
// Cores are numbered socket by socket, NUMA node by node, L3 group by L3 group. Core and L3
// identities follow Discover: the lowest online CPU ID of the group. Die is always 0. At most
// 8192 CPUs. Source is "synthetic:" + spec.
func Synthetic(spec string) (*Topology, error) {
	s, err := parseSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("synthetic topology %q: %w", spec, err)
	}
	return s.build("synthetic:" + spec), nil
}

// synthSpec is a validated spec: every division in build is exact.
type synthSpec struct {
	sockets, numa, cores, threads, l3 int // cores per socket, l3 groups per NUMA node
	adjacent                          bool
	offline                           cpuset.CPUSet
	isolation                         HostIsolation
}

func parseSpec(spec string) (synthSpec, error) {
	raw, err := splitSpec(spec)
	if err != nil {
		return synthSpec{}, err
	}
	s := synthSpec{sockets: 1, threads: 1, l3: 1}
	for _, f := range []struct {
		key string
		dst *int
		max int
	}{{"sockets", &s.sockets, 64}, {"numa", &s.numa, 1024}, {"cores", &s.cores, maxSyntheticCPUs},
		{"threads", &s.threads, 8}, {"l3", &s.l3, maxSyntheticCPUs}} {
		if v, ok := raw[f.key]; ok {
			if *f.dst, err = wholeNumber(f.key, v, f.max); err != nil {
				return s, err
			}
		}
	}
	if _, ok := raw["cores"]; !ok {
		return s, fmt.Errorf("cores is required (cores=N, the physical cores per socket)")
	}
	if _, ok := raw["numa"]; !ok {
		s.numa = s.sockets
	}
	if s.numa%s.sockets != 0 {
		return s, fmt.Errorf("numa %q: want a multiple of sockets (%d)", raw["numa"], s.sockets)
	}
	if perSocket := s.numa / s.sockets; s.cores%perSocket != 0 {
		return s, fmt.Errorf("cores %q: want a multiple of the %d NUMA nodes per socket", raw["cores"], perSocket)
	}
	if total := s.sockets * s.cores * s.threads; total > maxSyntheticCPUs {
		return s, fmt.Errorf("%d sockets * %d cores * %d threads = %d CPUs: want at most %d",
			s.sockets, s.cores, s.threads, total, maxSyntheticCPUs)
	}
	if perNUMA := s.sockets * s.cores / s.numa; perNUMA%s.l3 != 0 {
		return s, fmt.Errorf("l3 %q: want a divisor of the %d cores per NUMA node", raw["l3"], perNUMA)
	}
	switch v := raw["numbering"]; v {
	case "", "apart":
	case "adjacent":
		s.adjacent = true
	default:
		return s, fmt.Errorf("numbering %q: want apart or adjacent", v)
	}
	if err := s.parseOffline(raw); err != nil {
		return s, err
	}
	return s, s.parseIsolation(raw)
}

// splitSpec splits "k=v,k=v" into a map. Entries without "=" continue an offline list, so
// "offline=1,3" works; repeated or unknown keys are errors.
func splitSpec(spec string) (map[string]string, error) {
	raw := map[string]string{}
	if strings.TrimSpace(spec) == "" {
		return raw, nil
	}
	last := ""
	for _, entry := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(entry, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok && slices.Contains(listKeys, last):
			raw[last] += "," + entry
			continue
		case !ok:
			return nil, fmt.Errorf("entry %q: want key=value with a key from %s", entry, synthKeys)
		case !slices.Contains(append([]string{"sockets", "numa", "cores", "threads", "l3", "numbering"}, listKeys...), k):
			return nil, fmt.Errorf("unknown key %q: want %s", k, synthKeys)
		}
		if _, dup := raw[k]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		raw[k], last = v, k
	}
	return raw, nil
}

func (s *synthSpec) parseOffline(raw map[string]string) error {
	v, ok := raw["offline"]
	if !ok {
		s.offline = cpuset.New()
		return nil
	}
	set, err := ParseCPUList(v)
	if err != nil {
		return fmt.Errorf("offline: %w", err)
	}
	total := s.sockets * s.cores * s.threads
	if last := set.List(); len(last) > 0 && last[len(last)-1] >= total {
		return fmt.Errorf("offline %q: CPU %d is not in this topology (0-%d)", v, last[len(last)-1], total-1)
	}
	if set.Size() == total {
		return fmt.Errorf("offline %q: leaves no CPU online", v)
	}
	s.offline = set
	return nil
}

// wholeNumber parses a decimal from 1 to max.
func wholeNumber(key, v string, max int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fmt.Errorf("%s %q: want a whole number from 1 to %d", key, v, max)
	}
	return n, nil
}

func (s synthSpec) build(source string) *Topology {
	totalCores := s.sockets * s.cores
	perNUMA := totalCores / s.numa
	perL3 := perNUMA / s.l3
	coreID := make([]int, totalCores)     // lowest online CPU of each core
	l3ID := make([]int, totalCores/perL3) // lowest online CPU of each L3 group
	for i := range coreID {
		coreID[i] = -1
	}
	for i := range l3ID {
		l3ID[i] = -1
	}
	t := &Topology{Source: source, CPUs: map[int]CPU{}, Offline: s.offline, Isolation: s.isolation}
	for c := range totalCores {
		for th := range s.threads {
			id := th*totalCores + c
			if s.adjacent {
				id = c*s.threads + th
			}
			if s.offline.Contains(id) {
				continue
			}
			if coreID[c] < 0 || id < coreID[c] {
				coreID[c] = id
			}
			if g := c / perL3; l3ID[g] < 0 || id < l3ID[g] {
				l3ID[g] = id
			}
			// Core and L3 hold indexes here, replaced by identities below.
			t.CPUs[id] = CPU{ID: id, Socket: c / s.cores, NUMA: c / perNUMA, Core: c, L3: c / perL3}
		}
	}
	for id, cpu := range t.CPUs {
		cpu.Core, cpu.L3 = coreID[cpu.Core], l3ID[cpu.L3]
		t.CPUs[id] = cpu
	}
	return t
}

// parseIsolation reads isolcpus=, nohz_full= and rcu_nocbs= as the kernel would, strictly:
// an unknown isolcpus flag or a CPU outside the topology is an error.
func (s *synthSpec) parseIsolation(raw map[string]string) error {
	total := s.sockets * s.cores * s.threads
	check := func(key string, cpus cpuset.CPUSet) error {
		if ids := cpus.List(); len(ids) > 0 && ids[len(ids)-1] >= total {
			return fmt.Errorf("%s %q: CPU %d is not in this topology (0-%d)", key, raw[key], ids[len(ids)-1], total-1)
		}
		return nil
	}
	s.isolation = NoIsolation()
	h := &s.isolation
	if v, ok := raw["isolcpus"]; ok {
		cpus, f, notes, err := parseIsolcpus(v, total-1)
		if err == nil && len(notes) > 0 {
			err = errors.New(notes[0])
		}
		if err == nil {
			err = check("isolcpus", cpus)
		}
		if err != nil {
			return fmt.Errorf("isolcpus %q: %w", v, err)
		}
		h.Domain, h.ManagedIRQ = setIf(f.domain, cpus), setIf(f.managedIRQ, cpus)
		h.NoHZFull = setIf(f.nohz, cpus)
	}
	for _, key := range []string{"nohz_full", "rcu_nocbs"} {
		v, ok := raw[key]
		if !ok {
			continue
		}
		cpus, err := ParseKernelCPUList(v, total-1)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if err := check(key, cpus); err != nil {
			return err
		}
		if key == "nohz_full" {
			h.NoHZFull = h.NoHZFull.Union(cpus)
		} else {
			h.RCUNoCBs = cpus
		}
	}
	h.RCUNoCBs = h.RCUNoCBs.Union(h.NoHZFull)
	return nil
}

// setIf is cpus when on, else the empty set.
func setIf(on bool, cpus cpuset.CPUSet) cpuset.CPUSet {
	if on {
		return cpus
	}
	return cpuset.New()
}
