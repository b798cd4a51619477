package enforce

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// TestSynchronize: a restarted agent rebuilds its groups from live tasks. Healthy members
// are only read; a member with another cookie converges to its group's majority; a group
// whose members carry no cookie gets one on its oldest member.
func TestSynchronize(t *testing.T) {
	n := newFakeNode(t)
	shop, other, fresh := fakePod("p1", "shop"), fakePod("p2", "other"), fakePod("p3", "fresh")
	a, b, c := fakeCtr(shop, "a", 110), fakeCtr(shop, "b", 120), fakeCtr(shop, "c", 130)
	d := fakeCtr(other, "d", 210)
	e, f := fakeCtr(fresh, "e", 310), fakeCtr(fresh, "f", 320)
	stopped := fakeCtr(other, "old", 0)
	stopped.State = api.ContainerState_CONTAINER_STOPPED
	for _, x := range []*api.Container{a, b, c, d, e, f} {
		n.spawn(cgroupOf(x), int(x.Pid), int(x.Pid)+1)
	}
	n.setCookie(0x100, 110, 111, 120, 121) // shop: two members on 0x100
	n.setCookie(0x200, 130, 131)           // one on a cookie of a crashed reconcile
	n.setCookie(0x300, 210, 211)           // other: healthy

	m, _ := n.manager(Config{})
	err := m.Synchronize(ctx, []*api.PodSandbox{shop, other, fresh}, []*api.Container{a, b, c, d, e, f, stopped})
	must(t, err)
	var writes []string
	for _, call := range n.takeCalls() {
		if !strings.HasPrefix(call, "get ") {
			writes = append(writes, call)
		}
	}
	want := []string{"create 310 process", "share 110>130 process", "share 310>320 process"}
	if !slices.Equal(writes, want) {
		t.Errorf("cookie writes %q, want %q", writes, want)
	}
	for tid, c := range map[int]kernel.Cookie{110: 0x100, 121: 0x100, 130: 0x100, 131: 0x100, 211: 0x300} {
		if got := n.cookieOf(tid); got != c {
			t.Errorf("task %d: %#x, want %#x", tid, got, c)
		}
	}
	if got := n.cookieOf(321); got != n.cookieOf(310) || got == 0 {
		t.Errorf("fresh group: %#x and %#x, want one new cookie", n.cookieOf(310), got)
	}
	if s := m.Status(); s.Groups != 3 || s.Members != 6 {
		t.Errorf("status %+v", s)
	}

	// A second agent over the same tasks changes nothing.
	m2, _ := n.manager(Config{})
	must(t, m2.Synchronize(ctx, []*api.PodSandbox{shop, other, fresh}, []*api.Container{a, b, c, d, e, f}))
	for _, call := range n.takeCalls() {
		if !strings.HasPrefix(call, "get ") {
			t.Errorf("second restart wrote: %s", call)
		}
	}
	// And it shares the restored cookie with the next container.
	g := fakeCtr(shop, "g", 140)
	n.spawn(cgroupOf(g), 140)
	must(t, m2.StartContainer(ctx, shop, g))
	if n.cookieOf(140) != 0x100 {
		t.Errorf("new member after restart: %#x, want 0x100", n.cookieOf(140))
	}
}

// TestSynchronizeMemberVote: a member votes with the cookie most of its threads carry, so a
// restarted agent keeps that cookie and repairs the odd thread, not the others.
func TestSynchronizeMemberVote(t *testing.T) {
	n := newFakeNode(t)
	pod := fakePod("p1", "shop")
	a := fakeCtr(pod, "a", 110)
	n.spawn(cgroupOf(a), 110, 111, 112)
	n.setCookie(0x100, 110, 111)
	n.setCookie(0x200, 112)
	m, _ := n.manager(Config{})
	must(t, m.Synchronize(ctx, []*api.PodSandbox{pod}, []*api.Container{a}))
	for _, tid := range []int{110, 111, 112} {
		if got := n.cookieOf(tid); got != 0x100 {
			t.Errorf("task %d: %#x, want the majority's 0x100", tid, got)
		}
	}
}

// TestSynchronizeOldestCreates: a group whose members carry no cookie gets a new one on its
// oldest member. A process that exits while the agent reads it (its stat gone) does not
// make its member look older than it is.
func TestSynchronizeOldestCreates(t *testing.T) {
	n := newFakeNode(t)
	pod := fakePod("p1", "shop")
	a, b := fakeCtr(pod, "a", 110), fakeCtr(pod, "b", 120)
	n.spawn(cgroupOf(a), 110)
	n.spawn(cgroupOf(b), 120)
	n.spawn(cgroupOf(b), 125)
	must(t, os.Remove(filepath.Join(n.proc, "125", "stat")))
	m, _ := n.manager(Config{})
	must(t, m.Synchronize(ctx, []*api.PodSandbox{pod}, []*api.Container{b, a}))
	var creates []string
	for _, call := range n.takeCalls() {
		if strings.HasPrefix(call, "create ") {
			creates = append(creates, call)
		}
	}
	if !slices.Equal(creates, []string{"create 110 process"}) {
		t.Errorf("creates %q, want one on the oldest member's init, 110", creates)
	}
	if c := n.cookieOf(110); c == 0 || n.cookieOf(120) != c || n.cookieOf(125) != c {
		t.Errorf("cookies %#x %#x %#x: want one for the group", c, n.cookieOf(120), n.cookieOf(125))
	}
}
