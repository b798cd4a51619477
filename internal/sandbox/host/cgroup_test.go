package host_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/sandbox/host"
)

const (
	sandboxID   = "5ab0c"
	systemdPod  = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice"
	cgroupfsPod = "/kubepods/besteffort/pod7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2"
)

func TestPathFor(t *testing.T) {
	for _, tc := range []struct {
		name, id, cgroupsPath, parent string
		want, wantErr                 string
	}{
		{name: "cgroupfs: beside the sandbox's cgroup", id: sandboxID, cgroupsPath: cgroupfsPod + "/" + sandboxID,
			want: cgroupfsPod + "/podfence-vm-5ab0c"},
		{name: "systemd: in the pod's slice", id: sandboxID,
			cgroupsPath: "kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice:cri-containerd:" + sandboxID,
			want:        systemdPod + "/podfence-vm-5ab0c"},
		{name: "cgroupfs parent alone", id: sandboxID, parent: cgroupfsPod + "/", want: cgroupfsPod + "/podfence-vm-5ab0c"},
		{name: "systemd slice alone", id: sandboxID, parent: "kubepods-burstable-pod0b9c5b1e_4a0e_4d5c_9a51_1f0e0c2f7a11.slice",
			want: systemdPod + "/podfence-vm-5ab0c"},
		{name: "the cgroups path wins", id: sandboxID, cgroupsPath: "/a/b", parent: "/c", want: "/a/podfence-vm-5ab0c"},
		{name: "nothing", id: sandboxID, wantErr: "the runtime gave neither the sandbox's cgroups path nor the pod's cgroup parent"},
		{name: "no ID", cgroupsPath: "/a/b", wantErr: `pod sandbox ID "": want a non-empty name without '/'`},
		{name: "ID with a slash", id: "../x", cgroupsPath: "/a/b", wantErr: `pod sandbox ID "../x"`},
		{name: "bad cgroups path", id: sandboxID, cgroupsPath: "rel/x", wantErr: `the sandbox's cgroups path: cgroups path "rel/x"`},
		{name: "bad slice", id: sandboxID, parent: "kubepods",
			wantErr: `the pod's cgroup parent: cgroups path "kubepods::podfence-vm-5ab0c.slice": slice "kubepods"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := host.PathFor(tc.id, tc.cgroupsPath, tc.parent)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("PathFor = %q, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("PathFor = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOpenDirs resolves the sandbox cgroup of each driver in each layout to its directory
// per controller: one hierarchy per controller on v1 (cpu co-mounted with cpuacct), one
// directory on v2.
func TestOpenDirs(t *testing.T) {
	for _, tc := range []struct {
		layout, cgroupsPath string
		want                map[string]string
	}{
		{"v1", cgroupstest.ContainerCgroupfsV1, map[string]string{
			"cpuset": "cpuset" + cgroupfsPod, "cpu": "cpu,cpuacct" + cgroupfsPod, "memory": "memory" + cgroupfsPod, "pids": "pids" + cgroupfsPod}},
		{"v1", cgroupstest.ContainerSystemd, map[string]string{
			"cpuset": "cpuset" + systemdPod, "cpu": "cpu,cpuacct" + systemdPod, "memory": "memory" + systemdPod, "pids": "pids" + systemdPod}},
		{"v2", cgroupstest.ContainerCgroupfsV2, map[string]string{
			"cpuset": cgroupfsPod, "cpu": cgroupfsPod, "memory": cgroupfsPod, "pids": cgroupfsPod}},
		{"v2", cgroupstest.ContainerSystemd, map[string]string{
			"cpuset": systemdPod, "cpu": systemdPod, "memory": systemdPod, "pids": systemdPod}},
	} {
		root := cgroupstest.Tree(t, tc.layout)
		l, err := cgroups.Detect(root)
		if err != nil {
			t.Fatal(err)
		}
		path, err := host.PathFor(sandboxID, tc.cgroupsPath, "")
		if err != nil {
			t.Fatal(err)
		}
		cg, err := host.Open(&cgroupstest.Kernel{}, l, path)
		if err != nil {
			t.Fatal(err)
		}
		for ctrl, rel := range tc.want {
			want := filepath.Join(root, rel, "podfence-vm-5ab0c")
			if got, ok := cg.Dir(ctrl); !ok || got != want {
				t.Errorf("%s %s: %s dir %q, want %q", tc.layout, tc.cgroupsPath, ctrl, got, want)
			}
		}
	}
}
