package host_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
	"github.com/podfence/podfence/internal/testwait"
)

// TestRealCgroup makes a pod cgroup and a sandbox cgroup in it on the real kernel, starts a
// stand-in shim and hypervisor with extra threads, applies limits and places them, and
// checks the kernel's files, every thread's /proc/<tid>/cgroup and its CPU affinity; then a
// hot-plugged vCPU and a thread put elsewhere are caught by the next check, and removal
// moves the live processes out.
func TestRealCgroup(t *testing.T) {
	l := realLayout(t)
	pod := fmt.Sprintf("/podfence-test-%d", os.Getpid())
	podCgroup(t, l, pod)
	hyp, shim, hotplug := standIns(t)

	cg, err := host.Open(cgroups.OS{}, l, pod+"/"+host.Name("test"))
	if err != nil {
		t.Fatal(err)
	}
	created, err := cg.Create()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cg.Remove(created) })
	cpu := firstCPU(t)
	want := sandbox.Limits{CPUs: cpuset.New(cpu), Mems: cpuset.New(0), Quota: 50000, Memory: 256 << 20, Pids: 200}
	a, err := cg.Set(want)
	if err != nil || a.MemoryKept {
		t.Fatalf("Set = %+v, %v", a, err)
	}
	files := map[string]map[string]string{ // controller → file → value
		"cpuset": {"cpuset.cpus": strconv.Itoa(cpu), "cpuset.mems": "0"},
		"cpu":    {"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"},
		"memory": {"memory.limit_in_bytes": "268435456"},
		"pids":   {"pids.max": "200"},
	}
	if l.Version == cgroups.V2 {
		files["cpu"] = map[string]string{"cpu.max": "50000 100000"}
		files["memory"] = map[string]string{"memory.max": "268435456"}
	}
	checkReal(t, cg, files)

	table, err := host.ReadProcs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	pids := sandbox.Members(table, hyp, nil)
	if !slices.Equal(pids, []int{shim, hyp}) {
		t.Fatalf("members from hypervisor %d: %v, want [shim %d, hypervisor %d]", hyp, pids, shim, hyp)
	}
	p, err := cg.Place("/proc", pids)
	if err != nil || p.Processes != 2 || p.Moved != p.Threads {
		t.Fatalf("Place = %+v, %v; want 2 processes, every thread moved", p, err)
	}
	if n := threadsIn(t, l, cg.Path(), pids...); n != p.Threads || n < 2+helperThreads {
		t.Errorf("%d threads in /proc, Place saw %d", n, p.Threads)
	}
	checkAffinity(t, hyp, strconv.Itoa(cpu))
	t.Logf("cgroup %s: %v, limits %+v; placed shim %d and hypervisor %d, %d threads", l.Version, cg.Path(), a.Limits, shim, hyp, p.Threads)

	hotplug() // new vCPU threads start in their creator's cgroup
	if p, err := cg.Place("/proc", pids); err != nil || p.Moved != 0 {
		t.Errorf("after a hot-plug: Place = %+v, %v; want nothing to move", p, err)
	}
	escape(t, l, hyp) // as a hypervisor's manager may do with vCPU threads
	if p, err := cg.Place("/proc", pids); err != nil || p.Moved == 0 {
		t.Errorf("after a thread left: Place = %+v, %v; want it moved back", p, err)
	}
	threadsIn(t, l, cg.Path(), pids...)

	moved, err := cg.Remove(created)
	if err != nil || moved != 2 {
		t.Fatalf("Remove = %d, %v; want the 2 live processes moved out", moved, err)
	}
	for _, ctrl := range []string{"cpuset", "cpu", "memory"} {
		if d, _ := cg.Dir(ctrl); dirExists(d) {
			t.Errorf("%s still there", d)
		}
	}
}

// podCgroup makes the stand-in pod cgroup, as a runtime would: on v1 with the root's CPUs
// and memory nodes; on v2 with the sandbox controllers enabled at the root.
func podCgroup(t *testing.T, l cgroups.Layout, pod string) {
	var dirs []string
	for _, ctrl := range []string{"cpuset", "cpu", "memory", "pids"} {
		if d, err := l.Dir(ctrl, pod); err == nil && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		if _, err := cgroups.Mkdir(d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { evacuateAndRemove(t, d) })
	}
	if l.Version == cgroups.V1 {
		root, _ := l.Dir("cpuset", "/")
		dir, _ := l.Dir("cpuset", pod)
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := cgroups.Read(root, f)
			if err == nil {
				err = cgroups.Write(dir, f, strings.TrimSpace(string(b)))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// evacuateAndRemove moves what is left in dir to the root of its hierarchy and removes it.
func evacuateAndRemove(t *testing.T, dir string) {
	root := dir[:strings.LastIndex(dir, "/podfence-test-")]
	for _, sub := range []string{host.Name("test"), ""} {
		d := filepath.Join(dir, sub)
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, pid := range strings.Fields(string(b)) {
			_ = cgroups.Write(root, "cgroup.procs", pid)
		}
		var err error
		testwait.Until(time.Until(testwait.Deadline(t)), func() bool { // EBUSY: a killed task still exiting
			err = cgroups.Rmdir(d)
			return !errors.Is(err, syscall.EBUSY)
		})
		if err != nil && !cgroups.Gone(err) {
			t.Errorf("clean-up: %v", err)
		}
	}
}

// escape moves one of the hypervisor's threads (v1) or the whole process (v2, where
// threads of a domain cgroup move together) to the root cgroup.
func escape(t *testing.T, l cgroups.Layout, hyp int) {
	root, _ := l.Dir("cpu", "/")
	if l.Version == cgroups.V2 {
		if err := cgroups.Write(root, "cgroup.procs", strconv.Itoa(hyp)); err != nil {
			t.Fatal(err)
		}
		return
	}
	tids, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", hyp))
	if err != nil {
		t.Fatal(err)
	}
	if err := cgroups.Write(root, "tasks", tids[len(tids)-1].Name()); err != nil {
		t.Fatal(err)
	}
}

func checkReal(t *testing.T, cg *host.Cgroup, files map[string]map[string]string) {
	t.Helper()
	for ctrl, fs := range files {
		dir, ok := cg.Dir(ctrl)
		if !ok {
			t.Errorf("no %s directory", ctrl)
			continue
		}
		for name, want := range fs {
			b, err := cgroups.Read(dir, name)
			if got := strings.TrimSpace(string(b)); err != nil || got != want {
				t.Errorf("%s/%s = %q, %v; want %q", dir, name, got, err, want)
			}
		}
	}
}

// checkAffinity checks that every thread of pid may run on cpus only (the cpuset at work).
func checkAffinity(t *testing.T, pid int, cpus string) {
	t.Helper()
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range entries {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != cpus {
				t.Errorf("thread %s of %d may run on %s, want %s", e.Name(), pid, strings.TrimSpace(v), cpus)
			}
		}
	}
}

// firstCPU is the first online CPU.
func firstCPU(t *testing.T) int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	s, err := topology.ParseCPUList(string(b))
	if err != nil || s.IsEmpty() {
		t.Fatalf("online CPUs %q: %v", b, err)
	}
	return s.List()[0]
}

func dirExists(d string) bool {
	st, err := os.Stat(d)
	return err == nil && st.IsDir()
}
