package topology_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// shape is what a topology must look like; shared by the Discover and Synthetic tables.
type shape struct {
	cpus, cores, threads int
	sockets, numa, l3    []int
	cpu                  topology.CPU   // one CPU, checked field by field
	siblings             string         // Siblings(cpu.ID)
	l3Members            map[int]string // L3 group ID -> CPUsInL3
	numaOf               map[int]int    // CPU ID -> NUMA node
	numaMembers          map[int]string // NUMA node -> CPUsInNUMA
	offline              string         // Offline
	summary              string         // Summary()
}

func checkShape(t *testing.T, topo *topology.Topology, want shape) {
	t.Helper()
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("NumCPUs", topo.NumCPUs(), want.cpus)
	check("Sockets", topo.Sockets(), want.sockets)
	check("NUMANodes", topo.NUMANodes(), want.numa)
	check("len(Cores)", len(topo.Cores()), want.cores)
	check("ThreadsPerCore", topo.ThreadsPerCore(), want.threads)
	check("L3Groups", topo.L3Groups(), want.l3)
	check("CPUs[cpu]", topo.CPUs[want.cpu.ID], want.cpu)
	check("Siblings", topo.Siblings(want.cpu.ID).String(), want.siblings)
	for l3, members := range want.l3Members {
		check("CPUsInL3", topo.CPUsInL3(l3).String(), members)
	}
	for cpu, node := range want.numaOf {
		check("NUMA of CPU", topo.CPUs[cpu].NUMA, node)
	}
	for node, members := range want.numaMembers {
		check("CPUsInNUMA", topo.CPUsInNUMA(node).String(), members)
	}
	check("Offline", topo.Offline.String(), want.offline)
	check("Summary", topo.Summary(), want.summary)
}

func TestDiscoverFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    shape
	}{{
		fixture: "dual-socket-smt-apart",
		want: shape{cpus: 96, cores: 48, threads: 2, sockets: []int{0, 1}, numa: []int{0, 1}, l3: []int{0, 24},
			cpu:       topology.CPU{ID: 74, Socket: 1, NUMA: 1, Core: 26, L3: 24},
			siblings:  "26,74",
			l3Members: map[int]string{0: "0-23,48-71", 24: "24-47,72-95"},
			numaOf:    map[int]int{0: 0, 47: 1, 71: 0, 72: 1},
			summary:   "2 sockets, 2 NUMA nodes, 48 cores, 96 CPUs (SMT2), 2 L3 groups"},
	}, {
		fixture: "single-socket-smt-adjacent",
		want: shape{cpus: 16, cores: 8, threads: 2, sockets: []int{0}, numa: []int{0}, l3: []int{0},
			cpu:       topology.CPU{ID: 5, Core: 4},
			siblings:  "4-5",
			l3Members: map[int]string{0: "0-15"},
			numaOf:    map[int]int{15: 0},
			summary:   "1 socket, 1 NUMA node, 8 cores, 16 CPUs (SMT2), 1 L3 group"},
	}, {
		fixture: "vm-2cpu-nosmt",
		want: shape{cpus: 2, cores: 2, threads: 1, sockets: []int{0}, numa: []int{0}, l3: []int{0},
			cpu:       topology.CPU{ID: 1, Core: 1},
			siblings:  "1",
			l3Members: map[int]string{0: "0-1"},
			numaOf:    map[int]int{1: 0},
			summary:   "1 socket, 1 NUMA node, 2 cores, 2 CPUs (no SMT), 1 L3 group"},
	}, {
		fixture: "epyc-4numa-multi-l3",
		want: shape{cpus: 64, cores: 32, threads: 2, sockets: []int{0}, numa: []int{0, 1, 2, 3},
			l3:          []int{0, 4, 8, 12, 16, 20, 24, 28},
			cpu:         topology.CPU{ID: 45, NUMA: 1, Core: 13, L3: 12},
			siblings:    "13,45",
			l3Members:   map[int]string{4: "4-7,36-39", 28: "28-31,60-63"},
			numaOf:      map[int]int{7: 0, 8: 1, 40: 1, 63: 3},
			numaMembers: map[int]string{0: "0-7,32-39", 3: "24-31,56-63"},
			summary:     "1 socket, 4 NUMA nodes, 32 cores, 64 CPUs (SMT2), 8 L3 groups"},
	}, {
		fixture: "offline-cpus",
		want: shape{cpus: 6, cores: 3, threads: 2, sockets: []int{0}, numa: []int{0}, l3: []int{0},
			cpu:       topology.CPU{ID: 5, Core: 4},
			siblings:  "4-5",
			l3Members: map[int]string{0: "0-5"},
			numaOf:    map[int]int{5: 0},
			offline:   "6-7",
			summary:   "1 socket, 1 NUMA node, 3 cores, 6 CPUs (SMT2), 1 L3 group, offline 6-7"},
	}} {
		t.Run(tc.fixture, func(t *testing.T) {
			topo, err := topology.Discover(fixture(tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if topo.Source != fixture(tc.fixture) {
				t.Errorf("Source = %q, want %q", topo.Source, fixture(tc.fixture))
			}
			checkShape(t, topo, tc.want)
		})
	}
}

// edit changes every file matching a glob under root: remove it (content "-") or write content.
func edit(t *testing.T, root, glob, content string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("glob %s: %v, %d files", glob, err, len(files))
	}
	for _, f := range files {
		if content == "-" {
			err = os.RemoveAll(f)
		} else {
			err = os.WriteFile(f, []byte(content+"\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestDiscoverVariants(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, glob, content string
		cpu                          topology.CPU // CPUs[cpu.ID] after the edit
		l3Groups                     int
		offline                      string
	}{
		{name: "no die_id (older kernels) means die 0", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu*/topology/die_id", content: "-",
			cpu: topology.CPU{ID: 5, Core: 4}, l3Groups: 1},
		{name: "die_id is read", fixture: "vm-2cpu-nosmt",
			glob: "devices/system/cpu/cpu1/topology/die_id", content: "3",
			cpu: topology.CPU{ID: 1, Die: 3, Core: 1}, l3Groups: 1},
		{name: "no cache dir means L3 = core", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu*/cache", content: "-",
			cpu: topology.CPU{ID: 5, Core: 4, L3: 4}, l3Groups: 8},
		{name: "L3 instruction cache is not an L3 group", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu*/cache/index3/type", content: "Instruction",
			cpu: topology.CPU{ID: 5, Core: 4, L3: 4}, l3Groups: 8},
		{name: "no node dir means NUMA 0", fixture: "epyc-4numa-multi-l3",
			glob: "devices/system/node", content: "-",
			cpu: topology.CPU{ID: 45, Core: 13, L3: 12}, l3Groups: 8},
		{name: "no present file falls back to possible", fixture: "offline-cpus",
			glob: "devices/system/cpu/present", content: "-",
			cpu: topology.CPU{ID: 5, Core: 4}, l3Groups: 1, offline: "6-7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, tc.fixture)
			edit(t, root, tc.glob, tc.content)
			topo, err := topology.Discover(root)
			if err != nil {
				t.Fatal(err)
			}
			if got := topo.CPUs[tc.cpu.ID]; got != tc.cpu {
				t.Errorf("CPUs[%d] = %+v, want %+v", tc.cpu.ID, got, tc.cpu)
			}
			if got := len(topo.L3Groups()); got != tc.l3Groups {
				t.Errorf("len(L3Groups) = %d, want %d", got, tc.l3Groups)
			}
			if got := topo.Offline.String(); got != tc.offline {
				t.Errorf("Offline = %q, want %q", got, tc.offline)
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	const cpu = "ROOT/devices/system/cpu"
	for _, tc := range []struct {
		name, fixture, glob, content string
		want                         string // ROOT stands for the tree's root
		notExist                     bool   // errors.Is(err, fs.ErrNotExist)
	}{
		{name: "missing online file", fixture: "vm-2cpu-nosmt", glob: "devices/system/cpu/online", content: "-",
			want: "read " + cpu + "/online: no such file or directory", notExist: true},
		{name: "garbage online list", fixture: "vm-2cpu-nosmt", glob: "devices/system/cpu/online", content: "0-x",
			want: "parse " + cpu + `/online: cpu list "0-x": entry "0-x": "x" is not a CPU number (want N or N-M, N a decimal from 0 to 8191)`},
		{name: "no present nor possible", fixture: "vm-2cpu-nosmt", glob: "devices/system/cpu/p[or][se]*", content: "-",
			want: "read " + cpu + "/possible: no such file or directory", notExist: true},
		{name: "garbage core_id", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu3/topology/core_id", content: "three",
			want: "parse " + cpu + `/cpu3/topology/core_id "three": want a decimal integer`},
		{name: "garbage physical_package_id", fixture: "vm-2cpu-nosmt",
			glob: "devices/system/cpu/cpu1/topology/physical_package_id", content: "",
			want: "parse " + cpu + `/cpu1/topology/physical_package_id "": want a decimal integer`},
		{name: "online CPU without topology", fixture: "offline-cpus",
			glob: "devices/system/cpu/online", content: "0-6",
			want: "read " + cpu + "/cpu6/topology/physical_package_id: no such file or directory", notExist: true},
		{name: "garbage cache level", fixture: "vm-2cpu-nosmt",
			glob: "devices/system/cpu/cpu0/cache/index2/level", content: "L2",
			want: "parse " + cpu + `/cpu0/cache/index2/level "L2": want a decimal integer`},
		{name: "sibling list without the CPU itself", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu1/topology/thread_siblings_list", content: "0",
			want: "parse " + cpu + `/cpu1/topology/thread_siblings_list "0": does not list cpu 1 itself`},
		{name: "sibling lists that disagree", fixture: "single-socket-smt-adjacent",
			glob: "devices/system/cpu/cpu0/topology/thread_siblings_list", content: "0",
			want: cpu + `: cpu0 thread_siblings_list "0" disagrees with the lists that group 0-1`},
		{name: "L3 lists that disagree", fixture: "epyc-4numa-multi-l3",
			glob: "devices/system/cpu/cpu5/cache/index3/shared_cpu_list", content: "0-7,32-39",
			want: cpu + `: cpu0 L3 shared_cpu_list "0-3,32-35" disagrees with the lists that group 0-3,5,32-35`},
		{name: "online CPUs in no NUMA node", fixture: "offline-cpus",
			glob: "devices/system/node/node0/cpulist", content: "0-3",
			want: "ROOT/devices/system/node: online CPUs 4-5 are in no NUMA node"},
		{name: "CPU in two NUMA nodes", fixture: "epyc-4numa-multi-l3",
			glob: "devices/system/node/node1/cpulist", content: "7-15,40-47",
			want: "ROOT/devices/system/node: cpu 7 is in NUMA nodes 0 and 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyFixture(t, tc.fixture)
			edit(t, root, tc.glob, tc.content)
			_, err := topology.Discover(root)
			want := strings.ReplaceAll(tc.want, "ROOT", root)
			if err == nil || err.Error() != want {
				t.Fatalf("Discover error = %v\nwant %s", err, want)
			}
			if got := errors.Is(err, fs.ErrNotExist); got != tc.notExist {
				t.Errorf("errors.Is(err, fs.ErrNotExist) = %v, want %v", got, tc.notExist)
			}
		})
	}
}

// TestDiscoverThisMachine reads the real /sys.
func TestDiscoverThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu/online"); err != nil {
		t.Skipf("no sysfs here: %v", err)
	}
	topo, err := topology.Discover("/sys")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(topo.Summary())
	for id, c := range topo.CPUs {
		if !topo.Siblings(id).Contains(c.Core) || !topo.CPUsInL3(c.L3).Contains(id) {
			t.Errorf("cpu %d: %+v is not in its own core or L3 group", id, c)
		}
	}
	// runtime.NumCPU counts the CPUs this process may run on; compare when that is all of them.
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if list, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok &&
			mustParseCPUSet(t, list).Equals(topo.Online()) && topo.NumCPUs() != runtime.NumCPU() {
			t.Errorf("NumCPUs = %d, runtime.NumCPU = %d", topo.NumCPUs(), runtime.NumCPU())
		}
	}
}
