package topology_test

import (
	"strconv"
	"strings"
	"testing"

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
