package host_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
	"github.com/podfence/podfence/internal/sandbox/host/hosttest"
)

// TestSystemdDriver runs a VM sandbox cgroup's life on the systemd-driver trees
// (cgroupstest "v1-systemd", "v2-systemd"), for a pod of each QoS class: the cgroup is
// podfence-vm-<id> in the pod's slice, from the sandbox's cgroups path or from kubelet's
// slice alone; Create makes only that directory (one per hierarchy on v1) and, on v2,
// enables in the slices only the controllers systemd left off (cpuset in the burstable
// pod's slice); Place moves the shim out of containerd.service; Remove takes only what
// Create made, leaving systemd's slice and scopes.
func TestSystemdDriver(t *testing.T) {
	for _, layout := range []string{"v1-systemd", "v2-systemd"} {
		for _, pod := range cgroupstest.SystemdPods {
			t.Run(layout+"/"+pod.QoS, func(t *testing.T) {
				n := hosttest.New(t, layout)
				path, err := host.PathFor(pod.SandboxID, pod.CgroupsPath(pod.SandboxID), pod.Parent)
				want := pod.Dir + "/" + host.Name(pod.SandboxID)
				if err != nil || path != want {
					t.Fatalf("PathFor = %q, %v; want %q", path, err, want)
				}
				if p, err := host.PathFor(pod.SandboxID, "", pod.Parent); err != nil || p != want {
					t.Errorf("PathFor from the slice alone = %q, %v; want %q", p, err, want)
				}
				scope := pod.Dir + "/cri-containerd-" + pod.SandboxID + ".scope"
				n.Spawn(100, 1, "containerd-shim", 3, "/system.slice/containerd.service")
				n.Spawn(pod.SandboxPID, 100, "qemu-system-x86", 4, scope)

				cg, err := host.Open(n, n.Layout, path)
				if err != nil {
					t.Fatal(err)
				}
				created, err := cg.Create()
				var wantCreated []string
				for _, h := range n.Hierarchies() {
					if h != "misc" {
						wantCreated = append(wantCreated, filepath.Join(n.Root, h, path))
					}
				}
				if err != nil || !slices.Equal(created, wantCreated) {
					t.Fatalf("Create = %v, %v; want only the sandbox cgroup: %v", created, err, wantCreated)
				}
				var enabled []string
				for _, w := range n.Kernel.Writes() {
					if strings.Contains(w, "cgroup.subtree_control=") {
						enabled = append(enabled, strings.TrimPrefix(w, n.Root))
					}
				}
				var wantEnabled []string
				if layout == "v2-systemd" && pod.QoS == "burstable" {
					wantEnabled = []string{pod.Dir + "/cgroup.subtree_control=+cpuset"}
				}
				if !slices.Equal(enabled, wantEnabled) {
					t.Errorf("controllers enabled: %v, want %v", enabled, wantEnabled)
				}

				l := sandbox.Limits{CPUs: cpuset.New(0, 1), Mems: cpuset.New(0), Quota: 50000, Memory: 256 * mi, Pids: 200}
				if _, err := cg.Set(l); err != nil {
					t.Fatal(err)
				}
				cpu, _ := cg.Dir("cpu")
				quota := map[string][2]string{"v1-systemd": {"cpu.cfs_quota_us", "50000"}, "v2-systemd": {"cpu.max", "50000 100000"}}[layout]
				if got := n.ReadFile(filepath.Join(strings.TrimPrefix(cpu, n.Root), quota[0])); got != quota[1] {
					t.Errorf("%s = %q, want %q", quota[0], got, quota[1])
				}
				p, err := cg.Place(n.Proc, []int{100, pod.SandboxPID})
				if err != nil || p != (host.Placement{Processes: 2, Threads: 7, Moved: 7}) {
					t.Fatalf("Place = %+v, %v; want the shim and the hypervisor, 7 threads moved", p, err)
				}
				for _, h := range n.Hierarchies() {
					if h == "misc" {
						continue
					}
					for _, tid := range []int{100, 102, pod.SandboxPID, pod.SandboxPID + 3} {
						if got := n.In(tid, h); got != path {
							t.Errorf("thread %d in %s cgroup %s, want %s", tid, h, got, path)
						}
					}
				}

				if _, err := cg.Remove(created); err != nil {
					t.Fatal(err)
				}
				for _, d := range created {
					if _, err := os.Stat(d); !os.IsNotExist(err) {
						t.Errorf("%s still there: %v", d, err)
					}
				}
				for _, h := range n.Hierarchies() {
					for _, d := range []string{pod.Dir, scope, pod.Dir + "/cri-containerd-" + pod.ContainerID + ".scope"} {
						if _, err := os.Stat(filepath.Join(n.Root, h, d)); err != nil {
							t.Errorf("systemd's %s: %v", filepath.Join(h, d), err)
						}
					}
				}
			})
		}
	}
}
