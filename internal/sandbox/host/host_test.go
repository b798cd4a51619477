package host_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
	"github.com/podfence/podfence/internal/sandbox/host/hosttest"
)

const mi = 1 << 20

// setup makes the fake node's pod cgroup and opens the sandbox cgroup in it.
func setup(t *testing.T, layout, podPath string) (*hosttest.Node, *host.Cgroup) {
	n := hosttest.New(t, layout)
	n.PodCgroup(podPath)
	cg, err := host.Open(n, n.Layout, filepath.Join(podPath, host.Name(sandboxID)))
	if err != nil {
		t.Fatal(err)
	}
	return n, cg
}

// file returns the interface file of the sandbox cgroup in hierarchy h.
func file(n *hosttest.Node, cg *host.Cgroup, h, name string) string {
	return n.ReadFile(filepath.Join(h, cg.Path(), name))
}

// TestLifecycle: create, limit, place a shim and a hypervisor with every thread (not the
// container), catch a thread moved away, lift the limits, remove with stragglers.
func TestLifecycle(t *testing.T) {
	for _, tc := range []struct{ layout, pod, cpuset, cpu, memory, pids string }{
		{"v1", cgroupfsPod, "cpuset", "cpu,cpuacct", "memory", "pids"},
		{"v1", systemdPod, "cpuset", "cpu,cpuacct", "memory", "pids"},
		{"v2", cgroupfsPod, "", "", "", ""},
		{"v2", systemdPod, "", "", "", ""},
	} {
		t.Run(tc.layout+tc.pod, func(t *testing.T) {
			n, cg := setup(t, tc.layout, tc.pod)
			n.Spawn(100, 1, "containerd-shim", 3, "/")
			n.Spawn(200, 100, "qemu-system-x86", 5, "/")
			n.Spawn(300, 100, "sleep", 1, tc.pod+"/ctr")

			created, err := cg.Create()
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{"v1": 4, "v2": 1}[tc.layout]; len(created) != want {
				t.Errorf("created %v, want %d directories (one per hierarchy)", created, want)
			}
			again, err := cg.Create()
			if err != nil || len(again) != 0 {
				t.Errorf("adopting: created %v, %v; want nothing", again, err)
			}
			l := sandbox.Limits{CPUs: cpuset.New(1, 2), Mems: cpuset.New(0), Quota: 75000, Memory: 224 * mi, Pids: 100}
			a, err := cg.Set(l)
			if err != nil || a.MemoryKept || !a.Limits.Equal(l) {
				t.Fatalf("Set = %+v, %v", a, err)
			}
			want := map[string]string{tc.cpuset + "/cpuset.cpus": "1-2", tc.cpuset + "/cpuset.mems": "0", tc.pids + "/pids.max": "100"}
			if tc.layout == "v1" {
				want[tc.cpu+"/cpu.cfs_quota_us"], want[tc.cpu+"/cpu.cfs_period_us"] = "75000", "100000"
				want[tc.memory+"/memory.limit_in_bytes"] = "234881024"
			} else {
				want[tc.cpu+"/cpu.max"], want[tc.memory+"/memory.max"] = "75000 100000", "234881024"
			}
			checkFiles(t, n, cg, want)

			table, err := host.ReadProcs(n.Proc)
			if err != nil {
				t.Fatal(err)
			}
			pids := sandbox.Members(table, 200, func(p sandbox.Proc) bool { return p.PID == 300 })
			if !slices.Equal(pids, []int{100, 200}) {
				t.Fatalf("members %v, want the shim and the hypervisor", pids)
			}
			p, err := cg.Place(n.Proc, pids)
			if err != nil || p != (host.Placement{Processes: 2, Threads: 8, Moved: 8}) {
				t.Fatalf("Place = %+v, %v; want 2 processes, 8 threads moved", p, err)
			}
			checkPlaced(t, n, cg, 100, 101, 102, 200, 201, 202, 203, 204)
			if got := n.In(300, tc.cpu); got != tc.pod+"/ctr" {
				t.Errorf("the container moved to %s", got)
			}
			if p, err := cg.Place(n.Proc, pids); err != nil || p.Moved != 0 {
				t.Errorf("second Place = %+v, %v; want nothing moved", p, err)
			}

			if tc.layout == "v1" { // a vCPU thread put elsewhere by the hypervisor's manager
				if err := n.Write(filepath.Join(n.Root, tc.cpu), "tasks", "203"); err != nil {
					t.Fatal(err)
				}
			} else { // a new helper process outside
				n.Spawn(400, 100, "virtiofsd", 2, "/")
				table, _ = host.ReadProcs(n.Proc)
				pids = sandbox.Members(table, 200, func(p sandbox.Proc) bool { return p.PID == 300 })
			}
			if p, err := cg.Place(n.Proc, pids); err != nil || p.Moved == 0 {
				t.Errorf("re-check = %+v, %v; want the stray thread moved back", p, err)
			}
			checkPlaced(t, n, cg, 203)

			if _, err := cg.Set(sandbox.Limits{}); err != nil {
				t.Fatal(err)
			}
			if tc.layout == "v1" {
				checkFiles(t, n, cg, map[string]string{tc.cpuset + "/cpuset.cpus": "0-7", tc.cpu + "/cpu.cfs_quota_us": "-1",
					tc.memory + "/memory.limit_in_bytes": "-1", tc.pids + "/pids.max": "max"})
			} else {
				checkFiles(t, n, cg, map[string]string{"cpuset.cpus": "0-7", "cpu.max": "max 100000", "memory.max": "max"})
			}

			moved, err := cg.Remove(created)
			if err != nil || moved == 0 {
				t.Fatalf("Remove = %d, %v; want the stragglers moved", moved, err)
			}
			for _, h := range []string{tc.cpuset, tc.cpu, tc.memory, tc.pids} {
				if _, err := os.Stat(filepath.Join(n.Root, h, cg.Path())); !os.IsNotExist(err) {
					t.Errorf("%s still there: %v", filepath.Join(h, cg.Path()), err)
				}
				if got := n.In(100, h); got != tc.pod {
					t.Errorf("shim in %s after removal, want the parent %s", got, tc.pod)
				}
			}
		})
	}
}

func checkFiles(t *testing.T, n *hosttest.Node, cg *host.Cgroup, want map[string]string) {
	t.Helper()
	for rel, v := range want {
		h, name := filepath.Split(rel)
		if got := file(n, cg, h, name); got != v {
			t.Errorf("%s = %q, want %q", rel, got, v)
		}
	}
}

func checkPlaced(t *testing.T, n *hosttest.Node, cg *host.Cgroup, tids ...int) {
	t.Helper()
	for _, tid := range tids {
		for _, h := range n.Hierarchies() {
			if h == "misc" {
				continue
			}
			if got := n.In(tid, h); got != cg.Path() {
				t.Errorf("thread %d in %s:%s, want %s", tid, h, got, cg.Path())
			}
		}
	}
}

// TestSetMemoryBelowUsage: a limit below what the sandbox uses is not written; the limit
// in place stays and Set says so.
func TestSetMemoryBelowUsage(t *testing.T) {
	for _, layout := range []string{"v1", "v2"} {
		n, cg := setup(t, layout, cgroupfsPod)
		n.Usage = "300000000"
		if _, err := cg.Create(); err != nil {
			t.Fatal(err)
		}
		a, err := cg.Set(sandbox.Limits{Memory: 224 * mi})
		if err != nil || !a.MemoryKept || a.Usage != 300000000 || a.Memory != 0 {
			t.Errorf("%s: Set = %+v, %v; want kept with no limit in place, usage 300000000", layout, a, err)
		}
		limitFile := map[string]string{"v1": "memory/memory.limit_in_bytes", "v2": "memory.max"}[layout]
		h, name := filepath.Split(limitFile)
		n.SetFile(filepath.Join(h, cg.Path(), name), "400000000\n")
		a, err = cg.Set(sandbox.Limits{Memory: 224 * mi})
		if err != nil || !a.MemoryKept || a.Memory != 400000000 {
			t.Errorf("%s: Set = %+v, %v; want the 400000000 in place kept", layout, a, err)
		}
		if a, err = cg.Set(sandbox.Limits{Memory: 512 * mi}); err != nil || a.MemoryKept || file(n, cg, h, name) != "536870912" {
			t.Errorf("%s: Set above usage = %+v, %v, file %s", layout, a, err, file(n, cg, h, name))
		}
	}
}

// TestSetCpusetOutsideParent: CPUs the pod's cgroup lacks are left out, with an error
// naming both sets; an unrestricted sandbox gets the parent's.
func TestSetCpusetOutsideParent(t *testing.T) {
	n, cg := setup(t, "v1", cgroupfsPod)
	n.SetFile(filepath.Join("cpuset", cgroupfsPod, "cpuset.cpus"), "0-3\n")
	if _, err := cg.Create(); err != nil {
		t.Fatal(err)
	}
	a, err := cg.Set(sandbox.Limits{CPUs: cpuset.New(2, 3, 4, 5)})
	want := "cpuset.cpus 2-5 is not within the pod cgroup's 0-3: using 2-3"
	if err == nil || !strings.Contains(err.Error(), want) || a.CPUs.String() != "2-3" {
		t.Errorf("Set = %+v, %v; want error %q", a, err, want)
	}
	if got := file(n, cg, "cpuset", "cpuset.cpus"); got != "2-3" {
		t.Errorf("cpuset.cpus = %q, want 2-3", got)
	}
	if a, err := cg.Set(sandbox.Limits{CPUs: cpuset.New(6)}); err == nil || a.CPUs.String() != "0-3" {
		t.Errorf("no common CPU: Set = %+v, %v; want the parent's 0-3 and an error", a, err)
	}
}

// TestSetFailures: a missing controller fails only the limits that need it; a refused
// write fails its limit and the rest is still written.
func TestSetFailures(t *testing.T) {
	n := hosttest.New(t, "v2")
	n.SetFile("cgroup.controllers", "cpuset cpu pids\n")
	layout, err := cgroups.Detect(n.Root)
	if err != nil {
		t.Fatal(err)
	}
	n.Layout = layout
	n.PodCgroup(cgroupfsPod)
	cg, err := host.Open(n, layout, filepath.Join(cgroupfsPod, host.Name(sandboxID)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cg.Create(); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.Set(sandbox.Limits{Quota: 5000}); err != nil {
		t.Errorf("no memory controller, no memory limit: %v", err)
	}
	_, err = cg.Set(sandbox.Limits{Quota: 5000, Memory: mi})
	if want := "no memory controller at " + n.Root + " (cgroup v2)"; err == nil || err.Error() != want {
		t.Errorf("Set = %v, want %q", err, want)
	}
	n.Kernel.WriteErr = map[string]error{"cpu.max": syscall.EINVAL}
	_, err = cg.Set(sandbox.Limits{Quota: 7000, Pids: 9})
	if err == nil || !strings.Contains(err.Error(), `write "7000 100000"`) || file(n, cg, "", "pids.max") != "9" {
		t.Errorf("Set = %v, pids.max %s; want the cpu.max error and pids written", err, file(n, cg, "", "pids.max"))
	}
}

// TestCreateEnablesControllers (v2): every ancestor hands the sandbox controllers down.
func TestCreateEnablesControllers(t *testing.T) {
	n, cg := setup(t, "v2", cgroupfsPod)
	if _, err := cg.Create(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range n.Kernel.Writes() {
		if strings.Contains(w, "cgroup.subtree_control") {
			got = append(got, strings.TrimPrefix(w, n.Root))
		}
	}
	want := []string{ // the copied root has them on already
		"/kubepods/cgroup.subtree_control=+cpuset +cpu +memory +pids",
		"/kubepods/besteffort/cgroup.subtree_control=+cpuset +cpu +memory +pids",
		cgroupfsPod + "/cgroup.subtree_control=+cpuset +cpu +memory +pids",
	}
	if !slices.Equal(got, want) {
		t.Errorf("subtree_control writes\n%q\nwant\n%q", got, want)
	}
	if _, err := cg.Create(); err != nil || len(n.Kernel.Writes()) != 3 {
		t.Errorf("adopting wrote again: %v %q", err, n.Kernel.Writes())
	}
}
