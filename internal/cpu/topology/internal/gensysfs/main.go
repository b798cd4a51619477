// Command gensysfs writes the sysfs fixture trees under topology/testdata/sysfs: plain text
// files, trimmed to what topology.Discover reads, shaped like the kernel's
// (https://docs.kernel.org/admin-guide/cputopology.html). It does not use package topology,
// so Discover is checked against an independent description of each machine.
//
//	go generate ./topology/   (runs: go run ./internal/gensysfs -out testdata/sysfs)
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/utils/cpuset"
)

// machine describes one fixture. Cores are numbered socket by socket; NUMA nodes and L3
// groups are runs of consecutive cores.
type machine struct {
	name                    string
	sockets, numaPerSocket  int
	coresPerSocket, threads int
	coresPerL3              int
	adjacent                bool          // sibling IDs c*threads+t instead of t*totalCores+c
	offline                 cpuset.CPUSet // present but offline: no topology or cache files
	noNodeDir               bool          // no devices/system/node (CONFIG_NUMA=n, small VMs)
	coreID                  func(local int) int
}

func machines() []machine {
	same := func(i int) int { return i }
	return []machine{
		// 2 x 24-core Xeon: sysfs core_id skips values, as on real Xeons (0-6,8-14,16-22,24-26).
		{name: "dual-socket-smt-apart", sockets: 2, numaPerSocket: 1, coresPerSocket: 24, threads: 2,
			coresPerL3: 24, coreID: func(i int) int { return i + i/7 }},
		{name: "single-socket-smt-adjacent", sockets: 1, numaPerSocket: 1, coresPerSocket: 8, threads: 2,
			coresPerL3: 8, adjacent: true, coreID: same},
		{name: "vm-2cpu-nosmt", sockets: 1, numaPerSocket: 1, coresPerSocket: 2, threads: 1,
			coresPerL3: 2, noNodeDir: true, coreID: same},
		// EPYC in NPS4 mode: 4 NUMA nodes of 8 cores, each core complex (CCX) of 4 shares an L3.
		{name: "epyc-4numa-multi-l3", sockets: 1, numaPerSocket: 4, coresPerSocket: 32, threads: 2,
			coresPerL3: 4, coreID: same},
		{name: "offline-cpus", sockets: 1, numaPerSocket: 1, coresPerSocket: 4, threads: 2,
			coresPerL3: 4, adjacent: true, offline: cpuset.New(6, 7), coreID: same},
	}
}

func main() {
	out := flag.String("out", "testdata/sysfs", "directory that receives one tree per machine")
	flag.Parse()
	for _, m := range machines() {
		dir := filepath.Join(*out, m.name)
		if err := os.RemoveAll(dir); err != nil {
			log.Fatal(err)
		}
		if err := m.write(dir); err != nil {
			log.Fatalf("%s: %v", m.name, err)
		}
	}
}

// thread is one logical CPU of the machine.
type thread struct{ id, socket, local, core, node, l3 int }

func (m machine) logical() []thread {
	total := m.sockets * m.coresPerSocket
	var out []thread
	for c := range total {
		for t := range m.threads {
			id := t*total + c
			if m.adjacent {
				id = c*m.threads + t
			}
			out = append(out, thread{id: id, socket: c / m.coresPerSocket, local: c % m.coresPerSocket,
				core: c, node: c / (m.coresPerSocket / m.numaPerSocket), l3: c / m.coresPerL3})
		}
	}
	return out
}

func (m machine) write(dir string) error {
	all := m.logical()
	var present, online []int
	for _, t := range all {
		present = append(present, t.id)
		if !m.offline.Contains(t.id) {
			online = append(online, t.id)
		}
	}
	// Like the kernel, sibling, cache and node lists name online CPUs only.
	group := func(key func(thread) int, of thread) string {
		var ids []int
		for _, t := range all {
			if key(t) == key(of) && !m.offline.Contains(t.id) {
				ids = append(ids, t.id)
			}
		}
		return cpuset.New(ids...).String()
	}
	cpuDir := filepath.Join(dir, "devices", "system", "cpu")
	files := map[string]string{
		filepath.Join(cpuDir, "online"):   cpuset.New(online...).String(),
		filepath.Join(cpuDir, "present"):  cpuset.New(present...).String(),
		filepath.Join(cpuDir, "possible"): cpuset.New(present...).String(),
	}
	nodes := map[int]thread{}
	for _, t := range all {
		if m.offline.Contains(t.id) {
			continue
		}
		nodes[t.node] = t
		base := filepath.Join(cpuDir, "cpu"+strconv.Itoa(t.id))
		topo := filepath.Join(base, "topology")
		files[filepath.Join(topo, "physical_package_id")] = strconv.Itoa(t.socket)
		files[filepath.Join(topo, "die_id")] = "0"
		files[filepath.Join(topo, "core_id")] = strconv.Itoa(m.coreID(t.local))
		files[filepath.Join(topo, "thread_siblings_list")] = group(func(t thread) int { return t.core }, t)
		// index0-2 are L1d, L1i and L2: Discover reads only their level.
		for i, level := range []string{"1", "1", "2"} {
			files[filepath.Join(base, "cache", fmt.Sprintf("index%d", i), "level")] = level
		}
		l3 := filepath.Join(base, "cache", "index3")
		files[filepath.Join(l3, "level")] = "3"
		files[filepath.Join(l3, "type")] = "Unified"
		files[filepath.Join(l3, "shared_cpu_list")] = group(func(t thread) int { return t.l3 }, t)
	}
	if !m.noNodeDir {
		for n, t := range nodes {
			file := filepath.Join(dir, "devices", "system", "node", fmt.Sprintf("node%d", n), "cpulist")
			files[file] = group(func(t thread) int { return t.node }, t)
		}
	}
	for file, content := range files {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(content+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}
