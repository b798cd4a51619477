package enforce

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// TestQEMUCPUIdle sets cpu.idle through the manager on the guest's real cgroup v2: a BE pod's
// cgroup gets 1, an LS pod's keeps 0, and the kernel then refuses the BE cgroup's cpu.weight
// (EINVAL), as the README warns for in-place resizes.
func TestQEMUCPUIdle(t *testing.T) {
	needQEMU(t)
	enable := func(dir string) {
		t.Helper()
		must(t, os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu"), 0))
	}
	enable(guestCgroups)
	cgroup(t, "/kubepods")
	enable(filepath.Join(guestCgroups, "kubepods"))
	cgroup(t, "/kubepods/podbe")
	cgroup(t, "/kubepods/podls")
	qos, err := coresched.ParseQoS("BE=on+idle")
	must(t, err)
	m, err := New(Config{QoS: qos}, kernel.Prctl{}, prometheus.NewRegistry(), logger(t))
	must(t, err)
	ctx := context.Background()
	be, ls := fakePod("be", "batch", coresched.KoordLabelQoS, "BE"), fakePod("ls", "web", coresched.KoordLabelQoS, "LS")
	be.Linux.CgroupParent, ls.Linux.CgroupParent = "/kubepods/podbe", "/kubepods/podls"
	must(t, m.RunPodSandbox(ctx, be))
	must(t, m.RunPodSandbox(ctx, ls))
	read := func(path, file string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(guestCgroups, path, file))
		must(t, err)
		return strings.TrimSpace(string(b))
	}
	if got := read("/kubepods/podbe", "cpu.idle"); got != "1" {
		t.Errorf("BE pod: cpu.idle %q, want 1", got)
	}
	if got := read("/kubepods/podls", "cpu.idle"); got != "0" {
		t.Errorf("LS pod: cpu.idle %q, want 0", got)
	}
	if r := m.State().(Report); r.CPUIdle != (IdleReport{Supported: true, Set: 1}) {
		t.Errorf("report %+v", r.CPUIdle)
	}
	err = os.WriteFile(filepath.Join(guestCgroups, "/kubepods/podbe", "cpu.weight"), []byte("50"), 0)
	if !errors.Is(err, syscall.EINVAL) {
		t.Errorf("cpu.weight of an idle cgroup: %v, want EINVAL", err)
	}
	must(t, os.WriteFile(filepath.Join(guestCgroups, "/kubepods/podls", "cpu.weight"), []byte("50"), 0))
	t.Logf("cpu.idle: BE pod %s, LS pod %s; cpu.weight of the idle cgroup: %v", read("/kubepods/podbe", "cpu.idle"),
		read("/kubepods/podls", "cpu.idle"), err)
}
