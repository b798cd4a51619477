package topology_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// FuzzParseCPUList: no panic, every accepted list round-trips through String, and holds
// exactly the CPUs its entries name.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,8", "1,3,5-7\n", " 2 , 4-4 ", "8191", "3-1", "1-2-3", ",", "0x1", "-0",
		"62-65,127-128", "0-8191,0-8191", "0-2000000", "8192"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := topology.ParseCPUList(s)
		if err != nil {
			return
		}
		if want := naiveCPUList(s); !set.Equals(want) {
			t.Fatalf("ParseCPUList(%q) = %q, want %q", s, set, want)
		}
		again, err := topology.ParseCPUList(set.String())
		if err != nil {
			t.Fatalf("ParseCPUList(%q) = %q, which does not parse: %v", s, set, err)
		}
		if !again.Equals(set) || again.String() != set.String() {
			t.Fatalf("ParseCPUList(%q) = %q, but that parses to %q", s, set, again)
		}
	})
}

// FuzzSynthetic: no panic, and an accepted spec has sockets*cores*threads CPUs, online or not.
func FuzzSynthetic(f *testing.F) {
	for _, s := range []string{
		"cores=1", "sockets=2,numa=4,cores=64,threads=2", "cores=8,threads=2,numbering=adjacent",
		"numa=4,cores=32,threads=2,l3=2", "cores=4,threads=2,offline=0,5", "sockets=0", "cores=4,l3=3",
		"offline=1-2,cores=4", "cores=2,,threads=2", "cores=99999999999999999999",
		"cores=4,threads=2,isolcpus=managed_irq,domain,1-3,5-7,nohz_full=2-N,rcu_nocbs=all:1/2", "cores=2,isolcpus=tick,1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		topo, err := topology.Synthetic(spec)
		if err != nil {
			return
		}
		// A spec that was accepted names each key at most once.
		n := map[string]int{"sockets": 1, "threads": 1}
		for _, entry := range strings.Split(spec, ",") {
			k, v, _ := strings.Cut(entry, "=")
			if k = strings.TrimSpace(k); k == "sockets" || k == "cores" || k == "threads" {
				n[k], _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		total := n["sockets"] * n["cores"] * n["threads"]
		if got := topo.NumCPUs() + topo.Offline.Size(); got != total || topo.NumCPUs() == 0 {
			t.Fatalf("Synthetic(%q): %d online + %d offline CPUs, want %d in all, some online",
				spec, topo.NumCPUs(), topo.Offline.Size(), total)
		}
		if topo.ThreadsPerCore() > n["threads"] || len(topo.Sockets()) > n["sockets"] {
			t.Fatalf("Synthetic(%q) = %s", spec, topo.Summary())
		}
		if h := topo.Isolation; !h.Isolated().Union(h.RCUNoCBs).IsSubsetOf(topo.Online().Union(topo.Offline)) ||
			!h.NoHZFull.IsSubsetOf(h.RCUNoCBs) {
			t.Fatalf("Synthetic(%q): isolation %s outside the topology or nohz_full not in rcu_nocbs", spec, h.Summary())
		}
	})
}

// naiveCPUList expands an accepted CPU list one CPU at a time.
func naiveCPUList(s string) cpuset.CPUSet {
	var ids []int
	for _, tok := range strings.Split(strings.TrimSpace(s), ",") {
		if tok = strings.TrimSpace(tok); tok == "" {
			continue
		}
		a, b, isRange := strings.Cut(tok, "-")
		lo, _ := strconv.Atoi(a)
		hi := lo
		if isRange {
			hi, _ = strconv.Atoi(b)
		}
		for id := lo; id <= hi; id++ {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// FuzzParseKernelCPUList: no panic, and an accepted list holds exactly the CPUs its regions
// name, expanded one at a time.
func FuzzParseKernelCPUList(f *testing.F) {
	for _, s := range []string{"", "all", "N", "0-N:2/4", "1,3 5-7", "all:1/2", "3-1", "0-15:3/2", "0-15:1/0", "8191",
		"8192", "0x1", ",,", "0-8191,0-8191", "0-8191:1/1,1-8191:1/1"} {
		f.Add(s)
	}
	const last = 63
	f.Fuzz(func(t *testing.T, s string) {
		set, err := topology.ParseKernelCPUList(s, last)
		if err != nil {
			return
		}
		want := map[int]bool{}
		for _, reg := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			span, pattern, _ := strings.Cut(reg, ":")
			num := func(s string) int {
				if s == "N" {
					return last
				}
				n, _ := strconv.Atoi(s)
				return n
			}
			lo, hi := 0, last
			if span != "all" {
				a, b, isRange := strings.Cut(span, "-")
				lo, hi = num(a), num(a)
				if isRange {
					hi = num(b)
				}
			}
			used, group := 1, 1
			if u, g, ok := strings.Cut(pattern, "/"); ok {
				used, group = num(u), num(g)
			}
			for id := lo; id <= hi; id++ {
				if (id-lo)%group < used {
					want[id] = true
				}
			}
		}
		if set.Size() != len(want) {
			t.Fatalf("ParseKernelCPUList(%q) = %s, want %d CPUs", s, set, len(want))
		}
		for id := range want {
			if !set.Contains(id) {
				t.Fatalf("ParseKernelCPUList(%q) = %s, lacks %d", s, set, id)
			}
		}
	})
}

// FuzzCmdlineIsolation: no panic whatever the command line, every set within the present
// CPUs, nohz_full CPUs among the rcu_nocbs ones, and the same answer twice.
func FuzzCmdlineIsolation(f *testing.F) {
	for _, s := range []string{"", "isolcpus=2-5", "isolcpus=managed_irq,domain,2-7 nohz_full=2-7 rcu_nocbs=2-7",
		`rcu-nocbs="all" isolcpus=nohz,3`, "isolcpus=x,1 -- nohz_full=1", `"isolcpus=3`, "isolcpus=nohz", "rcu_nocbs",
		"isolcpus=0-99 nohz_full=N isolcpus=1", "nohz_full=0-15:3/2"} {
		f.Add(s)
	}
	present := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 12, 13)
	f.Fuzz(func(t *testing.T, cmdline string) {
		h := topology.CmdlineIsolation(cmdline, present)
		for _, set := range []cpuset.CPUSet{h.Domain, h.NoHZFull, h.RCUNoCBs, h.ManagedIRQ} {
			if !set.IsSubsetOf(present) {
				t.Fatalf("CmdlineIsolation(%q) = %s: CPUs outside %s", cmdline, h.Summary(), present)
			}
		}
		if !h.NoHZFull.IsSubsetOf(h.RCUNoCBs) {
			t.Fatalf("CmdlineIsolation(%q) = %s: nohz_full CPUs not in rcu_nocbs", cmdline, h.Summary())
		}
		again := topology.CmdlineIsolation(cmdline, present)
		if again.Summary() != h.Summary() || strings.Join(again.Warnings, "\n") != strings.Join(h.Warnings, "\n") {
			t.Fatalf("CmdlineIsolation(%q) not deterministic: %s then %s", cmdline, h.Summary(), again.Summary())
		}
	})
}
