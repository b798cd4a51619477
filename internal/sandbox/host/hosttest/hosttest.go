// Package hosttest gives tests of VM sandbox enforcement a node: a copied cgroup tree
// (cgroups/cgroupstest) and a /proc tree, kept consistent by a stand-in kernel.
package hosttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

// Node is a copied cgroup tree (cgroupstest.Tree) and a /proc tree kept consistent by a
// stand-in kernel (its Cgroupfs methods): mkdir shows the sandbox controllers' files
// (cpuset, cpu, memory, pids), and a pid written to cgroup.procs (every thread) or a tid
// written to tasks moves tasks, updating /proc/<pid>/task/<tid>/cgroup and every
// cgroup.procs. Writing an unknown pid fails with ESRCH.
type Node struct {
	// Root is the cgroupfs root, Proc the /proc root.
	Root, Proc string
	Layout     cgroups.Layout
	// Kernel does the other reads and writes and records them (WriteErr fails them).
	Kernel *cgroupstest.Kernel
	// Usage is the memory usage new cgroups show ("0").
	Usage string

	t       testing.TB
	mu      sync.Mutex
	threads map[int][]int             // pid → tids
	where   map[int]map[string]string // tid → hierarchy → cgroup path
}

// New copies layout "v1" or "v2" (or another of cgroupstest.Tree); the root cpuset is CPUs 0-7 on nodes 0-1, every task
// starts in the root cgroup.
func New(t testing.TB, layout string) *Node {
	t.Helper()
	n := &Node{t: t, Root: cgroupstest.Tree(t, layout), Proc: filepath.Join(t.TempDir(), "proc"),
		Kernel: &cgroupstest.Kernel{}, threads: map[int][]int{}, where: map[int]map[string]string{}, Usage: "0"}
	var err error
	if n.Layout, err = cgroups.Detect(n.Root); err != nil {
		t.Fatal(err)
	}
	for _, h := range n.Hierarchies() {
		n.fill(filepath.Join(n.Root, h))
	}
	if err := os.MkdirAll(n.Proc, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

// Hierarchies are the hierarchy directories under root ("" on v2): on v1, those of cpuset,
// cpu,cpuacct, memory, pids and misc that the tree has.
func (n *Node) Hierarchies() []string {
	if n.Layout.Version == cgroups.V2 {
		return []string{""}
	}
	var hs []string
	for _, h := range []string{"cpuset", "cpu,cpuacct", "memory", "pids", "misc"} {
		if st, err := os.Stat(filepath.Join(n.Root, h)); err == nil && st.IsDir() {
			hs = append(hs, h)
		}
	}
	return hs
}

// fill writes the interface files the kernel shows in a new cgroup at dir.
func (n *Node) fill(dir string) {
	files := map[string]string{"cgroup.procs": "", "tasks": ""}
	h := n.hierarchyOf(dir)
	add := func(ctrl string, kv ...string) {
		if h != "" && !slices.Contains(strings.Split(h, ","), ctrl) {
			return
		}
		for i := 0; i < len(kv); i += 2 {
			files[kv[i]] = kv[i+1]
		}
	}
	if n.Layout.Version == cgroups.V2 {
		add("cpuset", "cpuset.cpus", "", "cpuset.mems", "", "cpuset.cpus.effective", "0-7\n", "cpuset.mems.effective", "0-1\n")
		add("cpu", "cpu.max", "max 100000\n")
		add("memory", "memory.max", "max\n", "memory.current", n.Usage+"\n")
		files["cgroup.controllers"] = "cpuset cpu memory pids misc\n"
		files["cgroup.subtree_control"] = "\n"
	} else {
		add("cpuset", "cpuset.cpus", "", "cpuset.mems", "")
		add("cpu", "cpu.cfs_quota_us", "-1\n", "cpu.cfs_period_us", "100000\n")
		add("memory", "memory.limit_in_bytes", "9223372036854771712\n", "memory.usage_in_bytes", n.Usage+"\n")
	}
	add("pids", "pids.max", "max\n")
	if dir == filepath.Join(n.Root, "cpuset") || (n.Layout.Version == cgroups.V2 && dir == n.Root) {
		files["cpuset.cpus"], files["cpuset.mems"] = "0-7\n", "0-1\n"
	}
	for name, content := range files {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil && name != "cgroup.procs" {
			continue // a file of the copied tree
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
}

// hierarchyOf is the hierarchy directory of dir ("" on v2).
func (n *Node) hierarchyOf(dir string) string {
	if n.Layout.Version == cgroups.V2 {
		return ""
	}
	rel, _ := filepath.Rel(n.Root, dir)
	return strings.Split(rel, string(filepath.Separator))[0]
}

// cgroupPath is dir's cgroup path in its hierarchy.
func (n *Node) cgroupPath(dir string) string {
	rel, _ := filepath.Rel(filepath.Join(n.Root, n.hierarchyOf(dir)), dir)
	return filepath.Clean("/" + rel)
}

// Mkdir creates cgroups like mkdir -p, with their interface files.
func (n *Node) Mkdir(dir string) ([]string, error) {
	created, err := n.Kernel.Mkdir(dir)
	for _, d := range created {
		n.fill(d)
	}
	return created, err
}

// Rmdir and Read are the Kernel's.
func (n *Node) Rmdir(dir string) error                { return n.Kernel.Rmdir(dir) }
func (n *Node) Read(dir, name string) ([]byte, error) { return n.Kernel.Read(dir, name) }

// Write moves tasks for cgroup.procs and tasks, shows cgroup.subtree_control without '+',
// and writes other files through the Kernel.

func (n *Node) Write(dir, name, value string) error {
	if name == "cgroup.subtree_control" { // shown without the '+'
		if err := n.Kernel.Write(dir, name, value); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(value, "+", "")+"\n"), 0o644)
	}
	if name != "cgroup.procs" && name != "tasks" {
		return n.Kernel.Write(dir, name, value)
	}
	id, err := strconv.Atoi(value)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, name), syscall.EINVAL)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	pid, tids := id, n.threads[id]
	if name == "tasks" {
		pid, tids = n.pidOf(id), []int{id}
	}
	if len(n.threads[pid]) == 0 {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, name), syscall.ESRCH)
	}
	h, path := n.hierarchyOf(dir), n.cgroupPath(dir)
	for _, tid := range tids {
		n.where[tid][h] = path
		n.writeCgroupFile(pid, tid)
	}
	n.writeProcs()
	return nil
}

func (n *Node) pidOf(tid int) int {
	for pid, tids := range n.threads {
		if slices.Contains(tids, tid) {
			return pid
		}
	}
	return 0
}

// Spawn adds process pid (comm, parent ppid) with threads pid..pid+nthreads-1, all in cgroup
// path of every hierarchy.
func (n *Node) Spawn(pid, ppid int, comm string, nthreads int, path string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dir := filepath.Join(n.Proc, strconv.Itoa(pid))
	stat := fmt.Sprintf("%d (%s) S %d %d 0 0 -1 4194560 0 0 0 0\n", pid, comm, ppid, pid)
	if err := os.MkdirAll(filepath.Join(dir, "task"), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		n.t.Fatal(err)
	}
	for tid := pid; tid < pid+nthreads; tid++ {
		n.threads[pid] = append(n.threads[pid], tid)
		n.where[tid] = map[string]string{}
		for _, h := range n.Hierarchies() {
			n.where[tid][h] = path
		}
		n.writeCgroupFile(pid, tid)
	}
	n.writeProcs()
}

// writeCgroupFile writes /proc/<pid>/task/<tid>/cgroup (and /proc/<pid>/cgroup for the leader).
func (n *Node) writeCgroupFile(pid, tid int) {
	var b strings.Builder
	for i, h := range n.Hierarchies() {
		if n.Layout.Version == cgroups.V2 {
			fmt.Fprintf(&b, "0::%s\n", n.where[tid][h])
		} else {
			fmt.Fprintf(&b, "%d:%s:%s\n", len(n.Hierarchies())-i, h, n.where[tid][h])
		}
	}
	dir := filepath.Join(n.Proc, strconv.Itoa(pid), "task", strconv.Itoa(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(b.String()), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if tid == pid {
		if err := os.WriteFile(filepath.Join(n.Proc, strconv.Itoa(pid), "cgroup"), []byte(b.String()), 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
}

// writeProcs rewrites every cgroup.procs from the tasks' places.
func (n *Node) writeProcs() {
	procs := map[string][]string{}
	for pid, tids := range n.threads {
		for _, h := range n.Hierarchies() {
			seen := map[string]bool{}
			for _, tid := range tids {
				dir := filepath.Join(n.Root, h, n.where[tid][h])
				if !seen[dir] {
					seen[dir] = true
					procs[dir] = append(procs[dir], strconv.Itoa(pid))
				}
			}
		}
	}
	_ = filepath.WalkDir(n.Root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			p := procs[filepath.Dir(path)]
			slices.Sort(p)
			err = os.WriteFile(path, []byte(strings.Join(p, "\n")), 0o644)
		}
		return err
	})
}

// PodCgroup makes the pod's cgroup at path in every hierarchy, as the runtime does: on v1
// with the root's CPUs and memory nodes.
func (n *Node) PodCgroup(path string) {
	for _, h := range n.Hierarchies() {
		if _, err := n.Mkdir(filepath.Join(n.Root, h, path)); err != nil {
			n.t.Fatal(err)
		}
	}
	for p := path; p != "/"; p = filepath.Dir(p) {
		for _, h := range n.Hierarchies() {
			n.fill(filepath.Join(n.Root, h, p)) // the copied tree's own directories too
		}
		if n.Layout.Version == cgroups.V1 {
			n.SetFile(filepath.Join("cpuset", p, "cpuset.cpus"), "0-7\n")
			n.SetFile(filepath.Join("cpuset", p, "cpuset.mems"), "0-1\n")
		}
	}
}

// In returns tid's cgroup path in hierarchy h ("" on v2; "cpu,cpuacct" on v1).
func (n *Node) In(tid int, h string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.where[tid][h]
}

// ReadFile returns a file of the tree (a path under Root), trimmed.
func (n *Node) ReadFile(rel string) string {
	b, err := os.ReadFile(filepath.Join(n.Root, rel))
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// SetFile writes a file of the tree (a path under Root).
func (n *Node) SetFile(rel, content string) {
	if err := os.WriteFile(filepath.Join(n.Root, rel), []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}
