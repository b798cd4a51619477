package enforce

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// TestSandboxRecreated: the kubelet re-creates a dead pod sandbox under the same pod UID,
// starts the pod's container again in it and only later removes the old sandbox. That
// removal forgets the old sandbox and its container only: the new ones keep their cookie
// and their metric series, in the running agent and in one restarted meanwhile. The new
// sandbox's removal then forgets them.
func TestSandboxRecreated(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "restarted"}[restart], func(t *testing.T) {
			n := newFakeNode(t)
			m, reg := n.manager(Config{DefaultGroup: coresched.ByPod})
			old := fakePod("p1", "shop")
			old.Pid = 100
			oldApp := fakeCtr(old, "app", 110)
			n.spawn(old.Linux.CgroupsPath, 100)
			n.spawn(cgroupOf(oldApp), 110)
			must(t, m.RunPodSandbox(ctx, old))
			must(t, m.StartContainer(ctx, old, oldApp))
			n.kill(100) // the sandbox dies, its container with it
			n.kill(110)
			oldApp.State = api.ContainerState_CONTAINER_STOPPED

			newer := fakePod("p1b", "shop")
			newer.Uid, newer.Name, newer.Pid = old.Uid, old.Name, 200
			newApp := fakeCtr(newer, "app", 210)
			n.spawn(newer.Linux.CgroupsPath, 200)
			n.spawn(cgroupOf(newApp), 210)
			must(t, m.RunPodSandbox(ctx, newer))
			must(t, m.StartContainer(ctx, newer, newApp))
			if restart {
				m, reg = n.manager(Config{DefaultGroup: coresched.ByPod})
				must(t, m.Synchronize(ctx, []*api.PodSandbox{old, newer}, []*api.Container{oldApp, newApp}))
			}
			cookie := n.cookieOf(210)
			if cookie == 0 || n.cookieOf(200) != cookie {
				t.Fatalf("new sandbox %#x, its container %#x: want one cookie", n.cookieOf(200), cookie)
			}

			m.RemovePodSandbox(ctx, old)
			if s := m.Status(); s.Groups != 1 || s.Members != 2 {
				t.Errorf("after the old sandbox's removal: %+v, want the new sandbox and its container", s)
			}
			late := fakeCtr(newer, "late", 220)
			n.spawn(cgroupOf(late), 220)
			n.takeCalls()
			must(t, m.StartContainer(ctx, newer, late))
			if got := n.cookieOf(220); got != cookie {
				t.Errorf("next container %#x, want the pod's %#x", got, cookie)
			}
			if calls := n.takeCalls(); slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "create") }) {
				t.Errorf("calls %q: the pod's cookie was forgotten and created again", calls)
			}
			err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP podfence_coresched_container A container (container="" for the pod sandbox), its group and its cookie state; value 1.
# TYPE podfence_coresched_container gauge
podfence_coresched_container{container="",group="pod:uid-p1",pod="shop/p1",state="ok"} 1
podfence_coresched_container{container="app",group="pod:uid-p1",pod="shop/p1",state="ok"} 1
podfence_coresched_container{container="late",group="pod:uid-p1",pod="shop/p1",state="ok"} 1
`), "podfence_coresched_container")
			if err != nil {
				t.Error(err)
			}

			m.RemovePodSandbox(ctx, newer)
			if s := m.Status(); s.Groups != 0 || s.Members != 0 {
				t.Errorf("after the new sandbox's removal: %+v, want nothing recorded", s)
			}
			if n, err := testutil.GatherAndCount(reg, "podfence_coresched_container"); err != nil || n != 0 {
				t.Errorf("%d member series left, %v", n, err)
			}
		})
	}
}

// TestRestartedContainerSeries: a container restarted under a new ID has one series, with
// the state of its latest instance (here a failed start replaces "ok"); when an instance
// goes while others remain, the series shows the remaining instance of the lowest ID.
func TestRestartedContainerSeries(t *testing.T) {
	n := newFakeNode(t)
	m, reg := n.manager(Config{})
	pod := fakePod("p1", "shop")
	instance := func(id string, pid int) *api.Container {
		c := fakeCtr(pod, "app", pid)
		c.Id = id
		c.Linux.CgroupsPath = "/kubepods/podp1/" + id
		n.spawn(cgroupOf(c), pid)
		return c
	}
	series := func(state string) string {
		return `
# HELP podfence_coresched_container A container (container="" for the pod sandbox), its group and its cookie state; value 1.
# TYPE podfence_coresched_container gauge
podfence_coresched_container{container="app",group="ns:shop",pod="shop/p1",state="` + state + `"} 1
`
	}
	a, b, c := instance("c1", 110), instance("c2", 120), instance("c3", 130)
	must(t, m.StartContainer(ctx, pod, a))
	n.failNext("get", kernel.ErrNoPermission) // b cannot read a's cookie, and so creates one
	n.failNext("create", kernel.ErrNoPermission)
	if err := m.StartContainer(ctx, pod, b); !errors.Is(err, kernel.ErrNoPermission) {
		t.Fatalf("second instance: %v, want a failed start", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(series("failed")), "podfence_coresched_container"); err != nil {
		t.Errorf("after a failed restart: %v", err)
	}
	must(t, m.StartContainer(ctx, pod, c))
	m.RemoveContainer(ctx, pod, c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(series("ok")), "podfence_coresched_container"); err != nil {
		t.Errorf("after the third instance's removal (c1 ok, c2 failed remain): %v", err)
	}
}
