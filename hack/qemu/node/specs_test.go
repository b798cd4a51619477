//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPodJSON checks the CRI fields crictl reads: kubelet's cgroupfs pod cgroup, host
// network, the group label, and the overhead only for a VM sandbox.
func TestPodJSON(t *testing.T) {
	b, err := podJSON(podSpec{name: "vm", uid: "u1", labels: group("a"), overhead: &limits{quota: 25000, period: 100000, memory: 1 << 27}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct{ Name, Namespace, UID string }
		Labels   map[string]string
		Linux    struct {
			CgroupParent string `json:"cgroup_parent"`
			Overhead     struct {
				CPUQuota int64 `json:"cpu_quota"`
				Memory   int64 `json:"memory_limit_in_bytes"`
			}
			SecurityContext struct {
				NamespaceOptions struct{ Network, Pid int } `json:"namespace_options"`
			} `json:"security_context"`
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Namespace != namespace || got.Metadata.UID != "u1" || got.Labels["podfence.io/core-sched-group"] != "a" ||
		got.Linux.CgroupParent != "/kubepods/burstable/podu1" || got.Linux.Overhead.CPUQuota != 25000 ||
		got.Linux.Overhead.Memory != 1<<27 || got.Linux.SecurityContext.NamespaceOptions.Network != 2 {
		t.Errorf("pod JSON %s decodes to %+v", b, got)
	}
	b, err = podJSON(podSpec{name: "plain", uid: "u2"})
	if err != nil || strings.Contains(string(b), "overhead") || !strings.Contains(string(b), `"annotations": {}`) {
		t.Errorf("pod JSON without overhead: %s, %v", b, err)
	}
}

func TestContainerdConfig(t *testing.T) {
	cfg := containerdConfig("/run/pf", "/usr/local/bin", pauseImage)
	for _, want := range []string{
		"socket_path = '/run/pf/nri.sock'",
		"sandbox = 'localhost/podfence-e2e/pause:latest'",
		"containerd.runtimes.runc]", "containerd.runtimes.kata]",
		"BinaryName = '/usr/local/bin/runc'",
		"SystemdCgroup = false",
		"snapshotter = 'overlayfs'",
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if n := strings.Count(cfg, "SystemdCgroup = false"); n != 2 {
		t.Errorf("%d runtimes on the cgroupfs driver, want 2 (runc, kata)", n)
	}
}
