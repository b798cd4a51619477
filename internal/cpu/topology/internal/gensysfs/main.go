// Command gensysfs writes the sysfs fixture trees under topology/testdata/sysfs: plain text
// files, trimmed to what topology.Discover and DiscoverIsolation read, shaped like the kernel's
// (https://docs.kernel.org/admin-guide/cputopology.html), and each machine's kernel command
// line under testdata/procfs/<machine>/cmdline. It does not use package topology, so
// Discover is checked against an independent description of each machine.
//
//	go generate ./topology/   (runs: go run ./internal/gensysfs -out testdata/sysfs -proc testdata/procfs)
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
	// cmdline is the kernel command line; isolated and nohzFull what the kernel made of it
	// (devices/system/cpu/isolated, nohz_full). nohzFull "-" leaves nohz_full out (a kernel
	// without CONFIG_NO_HZ_FULL).
	cmdline, isolated, nohzFull string
}

func machines() []machine {
	same := func(i int) int { return i }
	return []machine{
		// 2 x 24-core Xeon: sysfs core_id skips values, as on real Xeons (0-6,8-14,16-22,24-26).
		{name: "dual-socket-smt-apart", sockets: 2, numaPerSocket: 1, coresPerSocket: 24, threads: 2,
			coresPerL3: 24, coreID: func(i int) int { return i + i/7 },
			// A distribution kernel with CPUMASK_OFFSTACK prints an unallocated nohz_full mask so.
			cmdline: "BOOT_IMAGE=/vmlinuz-6.1.0-28-amd64 root=UUID=4d1c1e3a ro quiet", nohzFull: "(null)"},
		{name: "single-socket-smt-adjacent", sockets: 1, numaPerSocket: 1, coresPerSocket: 8, threads: 2,
			coresPerL3: 8, adjacent: true, coreID: same, cmdline: "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro"},
		{name: "vm-2cpu-nosmt", sockets: 1, numaPerSocket: 1, coresPerSocket: 2, threads: 1,
			coresPerL3: 2, noNodeDir: true, coreID: same, cmdline: "console=ttyS0 root=/dev/vda", nohzFull: "-"},
		// EPYC in NPS4 mode: 4 NUMA nodes of 8 cores, each core complex (CCX) of 4 shares an L3.
		{name: "epyc-4numa-multi-l3", sockets: 1, numaPerSocket: 4, coresPerSocket: 32, threads: 2,
			coresPerL3: 4, coreID: same, cmdline: "BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt"},
		{name: "offline-cpus", sockets: 1, numaPerSocket: 1, coresPerSocket: 4, threads: 2,
			coresPerL3: 4, adjacent: true, offline: cpuset.New(6, 7), coreID: same, cmdline: "root=/dev/sda1 ro"},
		// A real-time node as tuned's cpu-partitioning profile boots it: cores 2-7 (CPUs 2-7
		// and 18-23) isolated in every way, the housekeeping cores 0-1 left; quoted and
		// dashed parameters as the kernel reads them, and init's arguments after "--".
		{name: "isolcpus-smt-apart", sockets: 1, numaPerSocket: 1, coresPerSocket: 16, threads: 2,
			coresPerL3: 16, coreID: same,
			cmdline: `BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.12.0 root=/dev/mapper/rhel-root ro crashkernel=1G-4G:192M ` +
				`skew_tick=1 tsc=reliable rcupdate.rcu_normal_after_boot=1 isolcpus=managed_irq,domain,2-7,18-23 ` +
				`intel_pstate=disable nosoftlockup nohz=on nohz_full=2-7,18-23 rcu-nocbs="2-7,18-23" ` +
				`irqaffinity=0-1,8-17,24-31 -- isolcpus=9`,
			isolated: "2-7,18-23", nohzFull: "2-7,18-23"},
	}
}

func main() {
	out := flag.String("out", "testdata/sysfs", "directory that receives one sysfs tree per machine")
	proc := flag.String("proc", "testdata/procfs", "directory that receives one procfs tree (cmdline) per machine")
	flag.Parse()
	for _, m := range machines() {
		dir := filepath.Join(*out, m.name)
		if err := os.RemoveAll(dir); err != nil {
			log.Fatal(err)
		}
		if err := m.write(dir); err != nil {
			log.Fatalf("%s: %v", m.name, err)
		}
		cmdline := filepath.Join(*proc, m.name, "cmdline")
		if err := os.MkdirAll(filepath.Dir(cmdline), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(cmdline, []byte(m.cmdline+"\n"), 0o644); err != nil {
			log.Fatal(err)
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
		filepath.Join(cpuDir, "isolated"): m.isolated,
	}
	if m.nohzFull != "-" {
		files[filepath.Join(cpuDir, "nohz_full")] = m.nohzFull
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
