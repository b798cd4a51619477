package cgroups_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

// systemdTree copies a systemd-driver tree; on v1 it adds the cpu and cpuacct symlinks to
// cpu,cpuacct that a real node has.
func systemdTree(t *testing.T, layout string) (string, cgroups.Layout) {
	t.Helper()
	root := cgroupstest.Tree(t, layout)
	if layout == "v1-systemd" {
		for _, link := range []string{"cpu", "cpuacct"} {
			if err := os.Symlink("cpu,cpuacct", filepath.Join(root, link)); err != nil {
				t.Fatal(err)
			}
		}
	}
	l, err := cgroups.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, l
}

// TestSystemdDriverTrees resolves the cgroups path containerd gives each sandbox and
// container of a systemd-driver node (kubelet's slice, "cri-containerd", the ID) to its
// scope in every controller's hierarchy, and finds the scope's process there: pods of all
// three QoS classes (the guaranteed pod's slice sits right under kubepods.slice), on cgroup
// v2 and on hybrid v1 (whose unified and name=systemd hierarchies are not used).
func TestSystemdDriverTrees(t *testing.T) {
	for _, tc := range []struct {
		layout string
		want   cgroups.Version
		ctrls  []string
	}{
		{"v2-systemd", cgroups.V2, []string{"cpu", "cpuset", "hugetlb", "io", "memory", "misc", "pids", "rdma"}},
		{"v1-systemd", cgroups.V1, []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			root, l := systemdTree(t, tc.layout)
			if l.Version != tc.want || !slices.Equal(l.Controllers(), tc.ctrls) {
				t.Fatalf("Detect = %s %v; want %s %v", l.Version, l.Controllers(), tc.want, tc.ctrls)
			}
			for _, pod := range cgroupstest.SystemdPods {
				for id, pid := range map[string]int{pod.SandboxID: pod.SandboxPID, pod.ContainerID: pod.ContainerPID} {
					p, driver, err := cgroups.Path(pod.CgroupsPath(id))
					want := pod.Dir + "/cri-containerd-" + id + ".scope"
					if err != nil || driver != cgroups.Systemd || p != want {
						t.Fatalf("%s: Path(%q) = %q, %s, %v; want %q, systemd", pod.QoS, pod.CgroupsPath(id), p, driver, err, want)
					}
					for _, ctrl := range []string{"cpuset", "cpu", "memory", "pids"} {
						dir, err := l.Dir(ctrl, p)
						if err != nil {
							t.Fatal(err)
						}
						b, err := cgroups.Read(dir, "cgroup.procs")
						if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
							t.Errorf("%s %s: %s/cgroup.procs = %q, %v; want %d", pod.QoS, ctrl,
								strings.TrimPrefix(dir, root), b, err, pid)
						}
					}
				}
			}
		})
	}
}
