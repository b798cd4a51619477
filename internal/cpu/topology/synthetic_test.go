package topology_test

import (
	"maps"
	"testing"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func TestSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       shape
	}{{
		name: "two sockets, four NUMA nodes, SMT2, apart",
		spec: "sockets=2,numa=4,cores=64,threads=2",
		want: shape{cpus: 256, cores: 128, threads: 2, sockets: []int{0, 1}, numa: []int{0, 1, 2, 3},
			l3:          []int{0, 32, 64, 96},
			cpu:         topology.CPU{ID: 200, Socket: 1, NUMA: 2, Core: 72, L3: 64},
			siblings:    "72,200",
			l3Members:   map[int]string{32: "32-63,160-191"},
			numaOf:      map[int]int{0: 0, 128: 0, 63: 1, 255: 3},
			numaMembers: map[int]string{1: "32-63,160-191", 3: "96-127,224-255"},
			summary:     "2 sockets, 4 NUMA nodes, 128 cores, 256 CPUs (SMT2), 4 L3 groups"},
	}, {
		name: "defaults: one socket, one NUMA node, no SMT",
		spec: "cores=4",
		want: shape{cpus: 4, cores: 4, threads: 1, sockets: []int{0}, numa: []int{0}, l3: []int{0},
			cpu: topology.CPU{ID: 3, Core: 3}, siblings: "3", l3Members: map[int]string{0: "0-3"},
			summary: "1 socket, 1 NUMA node, 4 cores, 4 CPUs (no SMT), 1 L3 group"},
	}, {
		name: "adjacent numbering",
		spec: "sockets=2,cores=2,threads=4,numbering=adjacent",
		want: shape{cpus: 16, cores: 4, threads: 4, sockets: []int{0, 1}, numa: []int{0, 1}, l3: []int{0, 8},
			cpu: topology.CPU{ID: 13, Socket: 1, NUMA: 1, Core: 12, L3: 8}, siblings: "12-15",
			l3Members: map[int]string{8: "8-15"}, numaOf: map[int]int{7: 0, 8: 1},
			summary: "2 sockets, 2 NUMA nodes, 4 cores, 16 CPUs (SMT4), 2 L3 groups"},
	}, {
		name: "two L3 groups per NUMA node",
		spec: "numa=2,cores=16,threads=2,l3=2",
		want: shape{cpus: 32, cores: 16, threads: 2, sockets: []int{0}, numa: []int{0, 1}, l3: []int{0, 4, 8, 12},
			cpu: topology.CPU{ID: 29, NUMA: 1, Core: 13, L3: 12}, siblings: "13,29",
			l3Members:   map[int]string{0: "0-3,16-19", 12: "12-15,28-31"},
			numaMembers: map[int]string{1: "8-15,24-31"},
			summary:     "1 socket, 2 NUMA nodes, 16 cores, 32 CPUs (SMT2), 4 L3 groups"},
	}, {
		name: "offline CPUs, a list with commas; identities move to the lowest online CPU",
		spec: "cores=4,threads=2,offline=0,5",
		want: shape{cpus: 6, cores: 4, threads: 2, sockets: []int{0}, numa: []int{0}, l3: []int{1},
			cpu: topology.CPU{ID: 4, Core: 4, L3: 1}, siblings: "4",
			l3Members: map[int]string{1: "1-4,6-7"}, offline: "0,5",
			summary: "1 socket, 1 NUMA node, 4 cores, 6 CPUs (SMT2), 1 L3 group, offline 0,5"},
	}, {
		name: "a whole offline core disappears",
		spec: "offline=6-7, cores = 4 ,threads=2,numbering=adjacent",
		want: shape{cpus: 6, cores: 3, threads: 2, sockets: []int{0}, numa: []int{0}, l3: []int{0},
			cpu: topology.CPU{ID: 5, Core: 4}, siblings: "4-5", offline: "6-7",
			summary: "1 socket, 1 NUMA node, 3 cores, 6 CPUs (SMT2), 1 L3 group, offline 6-7"},
	}, {
		name: "largest: 8192 CPUs",
		spec: "sockets=64,cores=16,threads=8",
		want: shape{cpus: 8192, cores: 1024, threads: 8, sockets: seq(64), numa: seq(64), l3: every(16, 64),
			cpu: topology.CPU{ID: 8191, Socket: 63, NUMA: 63, Core: 1023, L3: 1008}, siblings: "1023,2047,3071,4095,5119,6143,7167,8191",
			summary: "64 sockets, 64 NUMA nodes, 1024 cores, 8192 CPUs (SMT8), 64 L3 groups"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := topology.Synthetic(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if want := "synthetic:" + tc.spec; topo.Source != want {
				t.Errorf("Source = %q, want %q", topo.Source, want)
			}
			checkShape(t, topo, tc.want)
		})
	}
}

// seq is 0..n-1; every(step, n) is n multiples of step from 0.
func seq(n int) []int { return every(1, n) }

func every(step, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i * step
	}
	return out
}

func TestSyntheticErrors(t *testing.T) {
	const keys = "sockets, numa, cores, threads, l3, numbering, offline, isolcpus, nohz_full or rcu_nocbs"
	for _, tc := range []struct{ name, spec, want string }{
		{name: "empty", spec: "", want: "cores is required (cores=N, the physical cores per socket)"},
		{name: "no cores", spec: "sockets=2", want: "cores is required (cores=N, the physical cores per socket)"},
		{name: "zero sockets", spec: "sockets=0", want: `sockets "0": want a whole number from 1 to 64`},
		{name: "too many sockets", spec: "sockets=65,cores=1", want: `sockets "65": want a whole number from 1 to 64`},
		{name: "negative cores", spec: "cores=-1", want: `cores "-1": want a whole number from 1 to 8192`},
		{name: "signed cores", spec: "cores=+4", want: `cores "+4": want a whole number from 1 to 8192`},
		{name: "empty cores", spec: "cores=", want: `cores "": want a whole number from 1 to 8192`},
		{name: "word for cores", spec: "cores=eight", want: `cores "eight": want a whole number from 1 to 8192`},
		{name: "zero NUMA nodes", spec: "numa=0,cores=1", want: `numa "0": want a whole number from 1 to 1024`},
		{name: "nine threads", spec: "cores=1,threads=9", want: `threads "9": want a whole number from 1 to 8`},
		{name: "zero l3", spec: "cores=1,l3=0", want: `l3 "0": want a whole number from 1 to 8192`},
		{name: "NUMA not a multiple of sockets", spec: "sockets=2,numa=3,cores=6",
			want: `numa "3": want a multiple of sockets (2)`},
		{name: "cores not split by NUMA", spec: "numa=4,cores=6", want: `cores "6": want a multiple of the 4 NUMA nodes per socket`},
		{name: "l3 not dividing a NUMA node's cores", spec: "numa=2,cores=16,l3=3",
			want: `l3 "3": want a divisor of the 8 cores per NUMA node`},
		{name: "too many CPUs", spec: "sockets=2,cores=4096,threads=2",
			want: "2 sockets * 4096 cores * 2 threads = 16384 CPUs: want at most 8192"},
		{name: "unknown numbering", spec: "cores=4,numbering=sideways", want: `numbering "sideways": want apart or adjacent`},
		{name: "offline beyond the topology", spec: "cores=4,offline=2-4", want: `offline "2-4": CPU 4 is not in this topology (0-3)`},
		{name: "everything offline", spec: "cores=2,threads=2,offline=0-3", want: `offline "0-3": leaves no CPU online`},
		{name: "bad offline list", spec: "cores=2,offline=1,,0",
			want: `offline: cpu list "1,,0": empty entry (want N or N-M)`},
		{name: "unknown key", spec: "cores=2,smt=2", want: `unknown key "smt": want ` + keys},
		{name: "empty key", spec: "=2", want: `unknown key "": want ` + keys},
		{name: "repeated key", spec: "cores=2,threads=2,cores=4", want: "cores is given twice"},
		{name: "entry without =", spec: "cores=2,threads", want: `entry "threads": want key=value with a key from ` + keys},
		{name: "empty entry", spec: "cores=2,,threads=2", want: `entry "": want key=value with a key from ` + keys},
		{name: "isolcpus beyond the topology", spec: "cores=4,isolcpus=2-4",
			want: `isolcpus "2-4": isolcpus "2-4": CPU 4 is not in this topology (0-3)`},
		{name: "isolcpus unknown flag", spec: "cores=4,isolcpus=nohz,tick,2-3",
			want: `isolcpus "nohz,tick,2-3": unknown flag "tick" skipped, as the kernel skips it (known: domain, nohz, managed_irq)`},
		{name: "isolcpus without a list", spec: "cores=4,isolcpus=domain",
			want: `isolcpus "domain": no CPU list after the flags (want [flag,...]cpulist, e.g. isolcpus=domain,2-5)`},
		{name: "bad nohz_full list", spec: "cores=4,nohz_full=3-1",
			want: `nohz_full: cpu list "3-1": region "3-1": range end 1 is below its start 3`},
		{name: "rcu_nocbs beyond the topology", spec: "cores=4,rcu_nocbs=0-7:1/2",
			want: `rcu_nocbs "0-7:1/2": CPU 6 is not in this topology (0-3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := topology.Synthetic(tc.spec)
			want := `synthetic topology "` + tc.spec + `": ` + tc.want
			if err == nil || err.Error() != want {
				t.Fatalf("Synthetic(%q) error = %v\nwant %s", tc.spec, err, want)
			}
			if topo != nil {
				t.Errorf("Synthetic(%q) = %v with an error, want nil", tc.spec, topo)
			}
		})
	}
}

// TestDiscoverAgreesWithSynthetic checks one spec per fixture: both must build the same CPUs.
func TestDiscoverAgreesWithSynthetic(t *testing.T) {
	for _, tc := range []struct{ fixture, spec string }{
		{fixture: "dual-socket-smt-apart", spec: "sockets=2,cores=24,threads=2"},
		{fixture: "single-socket-smt-adjacent", spec: "cores=8,threads=2,numbering=adjacent"},
		{fixture: "vm-2cpu-nosmt", spec: "cores=2"},
		{fixture: "epyc-4numa-multi-l3", spec: "numa=4,cores=32,threads=2,l3=2"},
		{fixture: "offline-cpus", spec: "cores=4,threads=2,numbering=adjacent,offline=6-7"},
		{fixture: "isolcpus-smt-apart",
			spec: "cores=16,threads=2,isolcpus=managed_irq,domain,2-7,18-23,nohz_full=2-7,18-23,rcu_nocbs=2-7,18-23"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			found, err := topology.Discover(fixture(tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			made, err := topology.Synthetic(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(found.CPUs, made.CPUs) {
				for id, c := range found.CPUs {
					if made.CPUs[id] != c {
						t.Errorf("cpu %d: Discover %+v, Synthetic %+v", id, c, made.CPUs[id])
					}
				}
				t.Fatalf("CPUs differ: Discover %d, Synthetic %d", found.NumCPUs(), made.NumCPUs())
			}
			if !found.Offline.Equals(made.Offline) {
				t.Errorf("Offline: Discover %s, Synthetic %s", found.Offline, made.Offline)
			}
			host, err := topology.DiscoverHost(fixture(tc.fixture), procFixture(tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := host.Isolation.Summary(), made.Isolation.Summary(); got != want || len(host.Isolation.Warnings) > 0 {
				t.Errorf("Isolation: DiscoverHost %s (warnings %q), Synthetic %s", got, host.Isolation.Warnings, want)
			}
		})
	}
}
