package enforce

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// TestGroupsStayInTheirNamespace: the same group label in two namespaces gives two cookies
// (a pod cannot join another namespace's group by naming it, webhook or not); a group the
// operator shares among namespaces gives one cookie across them, and only them. Koordinator's
// label follows the same rule.
func TestGroupsStayInTheirNamespace(t *testing.T) {
	n := newFakeNode(t)
	var shared coresched.SharedGroups
	shared.Share("tenant-a", "a", "a2")
	m, _ := n.manager(Config{Shared: shared})
	pods := map[string]*api.PodSandbox{
		"a":         fakePod("pa", "a", coresched.LabelGroup, "tenant-a"),
		"a2":        fakePod("pa2", "a2", coresched.KoordLabelGroup, "tenant-a"),
		"b":         fakePod("pb", "b", coresched.LabelGroup, "tenant-a"),
		"b, Koord":  fakePod("pbk", "b", coresched.KoordLabelGroup, "tenant-a"),
		"a, web":    fakePod("pw", "a", coresched.LabelGroup, "web"),
		"b, web":    fakePod("pbw", "b", coresched.LabelGroup, "web"),
		"b, sameNS": fakePod("pb2", "b", coresched.LabelGroup, "tenant-a"),
	}
	cookie := map[string]kernel.Cookie{}
	pid := 100
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		pid += 10
		ctr := fakeCtr(pods[name], "app", pid)
		n.spawn(cgroupOf(ctr), pid, pid+1)
		must(t, m.StartContainer(ctx, pods[name], ctr))
		cookie[name] = n.cookieOf(pid + 1)
		if cookie[name] == 0 {
			t.Fatalf("%s: no cookie", name)
		}
	}
	for _, tc := range []struct {
		x, y string
		same bool
	}{
		{x: "a", y: "a2", same: true}, // shared by the operator, Koordinator's label in a2
		{x: "a", y: "b"},              // b names a's shared group: b's own group
		{x: "b", y: "b, Koord", same: true},
		{x: "b", y: "b, sameNS", same: true},
		{x: "a, web", y: "b, web"}, // not shared: per namespace
		{x: "a", y: "a, web"},
	} {
		if (cookie[tc.x] == cookie[tc.y]) != tc.same {
			t.Errorf("%s: %#x, %s: %#x; want same=%v", tc.x, cookie[tc.x], tc.y, cookie[tc.y], tc.same)
		}
	}
	if s := m.Status(); s.Groups != 4 {
		t.Errorf("status %+v: want 4 groups (tenant-a, b/tenant-a, a/web, b/web)", s)
	}
	var groups []string
	for _, c := range m.State().(Report).Containers {
		groups = append(groups, c.Namespace+":"+c.Group)
	}
	slices.Sort(groups)
	want := "a2:group:tenant-a a:group:a/web a:group:tenant-a b:group:b/tenant-a b:group:b/tenant-a b:group:b/tenant-a b:group:b/web"
	if got := strings.Join(groups, " "); got != want {
		t.Errorf("reported groups\n%s\nwant\n%s", got, want)
	}
}

// TestNoProfilesNoSharing: without profiles no group spans namespaces, whatever the label.
func TestNoProfilesNoSharing(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	a, b := fakePod("pa", "a", coresched.LabelGroup, "x"), fakePod("pb", "b", coresched.KoordLabelGroup, "x")
	ca, cb := fakeCtr(a, "app", 110), fakeCtr(b, "app", 210)
	n.spawn(cgroupOf(ca), 110)
	n.spawn(cgroupOf(cb), 210)
	must(t, m.StartContainer(ctx, a, ca))
	must(t, m.StartContainer(ctx, b, cb))
	if n.cookieOf(110) == n.cookieOf(210) {
		t.Errorf("pods of namespaces a and b labelled x share cookie %#x", n.cookieOf(110))
	}
}

// TestSynchronizeSplitsGlobalGroups: an agent before namespaced groups gave every pod
// labelled tenant-a one cookie, in any namespace. The upgraded agent, at its restart, keeps
// that cookie for the group the operator shares (a, a2: most members) and gives namespace
// b's pods a new cookie of their own; it rewrites nothing else.
func TestSynchronizeSplitsGlobalGroups(t *testing.T) {
	n := newFakeNode(t)
	pa := fakePod("pa", "a", coresched.LabelGroup, "tenant-a")
	pa2 := fakePod("pa2", "a2", coresched.KoordLabelGroup, "tenant-a")
	pb := fakePod("pb", "b", coresched.LabelGroup, "tenant-a")
	a1, a2, a3, b1 := fakeCtr(pa, "x", 110), fakeCtr(pa, "y", 120), fakeCtr(pa2, "x", 130), fakeCtr(pb, "x", 210)
	ctrs := []*api.Container{a1, a2, a3, b1}
	for _, c := range ctrs {
		n.spawn(cgroupOf(c), int(c.Pid), int(c.Pid)+1)
	}
	n.setCookie(0x100, 110, 111, 120, 121, 130, 131, 210, 211) // one global group

	var shared coresched.SharedGroups
	shared.Share("tenant-a", "a", "a2")
	m, _ := n.manager(Config{Shared: shared})
	must(t, m.Synchronize(ctx, []*api.PodSandbox{pa, pa2, pb}, ctrs))
	var writes []string
	for _, call := range n.takeCalls() {
		if !strings.HasPrefix(call, "get ") {
			writes = append(writes, call)
		}
	}
	if want := []string{"create 210 process"}; !slices.Equal(writes, want) {
		t.Errorf("cookie writes %q, want %q", writes, want)
	}
	for _, tid := range []int{110, 121, 130, 131} {
		if c := n.cookieOf(tid); c != 0x100 {
			t.Errorf("shared group, task %d: %#x, want 0x100 kept", tid, c)
		}
	}
	if b := n.cookieOf(211); b == 0x100 || b == 0 || b != n.cookieOf(210) {
		t.Errorf("namespace b: tasks %#x and %#x, want one new cookie", n.cookieOf(210), b)
	}
	if s := m.Status(); s.Groups != 2 {
		t.Errorf("status %+v: want 2 groups", s)
	}

	// Without the profile (or with a narrower one) the a2 pods split off too.
	m2, _ := n.manager(Config{})
	must(t, m2.Synchronize(ctx, []*api.PodSandbox{pa, pa2, pb}, ctrs))
	if c := n.cookieOf(131); c == 0x100 || c == 0 || c == n.cookieOf(211) {
		t.Errorf("a2 without a profile: %#x, want its own cookie (a 0x100, b %#x)", c, n.cookieOf(211))
	}
	if c := n.cookieOf(121); c != 0x100 {
		t.Errorf("a without a profile: %#x, want 0x100 kept (most members)", c)
	}
}
