package enforce

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/cpu/plan"
)

var ctx = context.Background()

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]coresched.Policy{"": coresched.Strict, "strict": coresched.Strict, "best-effort": coresched.BestEffort} {
		if got, err := coresched.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := coresched.ParsePolicy("lax"); err == nil || err.Error() != `core scheduling policy "lax": want strict or best-effort` {
		t.Errorf("err = %v", err)
	}
}

func TestCreateContainerPolicy(t *testing.T) {
	noSMT := fmt.Errorf("fake probe: %w", kernel.ErrNoSMT)
	for _, tc := range []struct {
		name     string
		probe    error
		disabled bool
		policy   coresched.Policy
		labels   []string
		err      string
	}{
		{name: "supported, explicit group", labels: []string{coresched.LabelGroup, "a"}},
		{name: "no SMT, unlabelled: report only", probe: noSMT},
		{name: "no SMT, policy none", probe: noSMT, labels: []string{coresched.LabelPolicy, "none"}},
		{name: "no SMT, explicit group, strict", probe: noSMT, labels: []string{coresched.LabelGroup, "a"},
			err: "pod asks for core-scheduling group group:shop/a, but this node cannot give it a cookie: probe: fake probe: " +
				"no SMT: core scheduling needs sibling hyperthreads (run it on a node with SMT and core scheduling, " +
				"or set the agent's --coresched-policy best-effort)"},
		{name: "no SMT, Koordinator exclusive, strict", probe: noSMT, labels: []string{coresched.KoordLabelPolicy, "exclusive"},
			err: "pod asks for core-scheduling group pod:uid-p1"},
		{name: "no SMT, explicit group, best-effort", probe: noSMT, policy: coresched.BestEffort, labels: []string{coresched.LabelGroup, "a"}},
		{name: "turned off, explicit group, strict", disabled: true, labels: []string{coresched.LabelGroup, "a"},
			err: "this node cannot give it a cookie: core scheduling is turned off on this node"},
		{name: "bad label, strict", labels: []string{coresched.LabelPolicy, "shared"},
			err: `core scheduling: label podfence.io/core-sched-policy="shared": unknown policy`},
		{name: "bad label, best-effort", policy: coresched.BestEffort, labels: []string{coresched.LabelPolicy, "shared"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.support.Err = tc.probe
			m, _ := n.manager(Config{Policy: tc.policy, Disabled: tc.disabled})
			pod := fakePod("p1", "shop", tc.labels...)
			adj, err := m.CreateContainer(ctx, pod, fakeCtr(pod, "app", 0), plan.Decision{})
			if adj != nil {
				t.Errorf("adjustment %v: want none", adj)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(),
				tc.err) && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v\nwant %q", err, tc.err)
			}
			if calls := n.takeCalls(); len(calls) != 0 {
				t.Errorf("kernel calls at create: %v", calls)
			}
		})
	}
}

// TestStartOrder: a group's first container creates its cookie, later ones share it from a
// live member; the pod sandbox is a member too; other groups get other cookies.
func TestStartOrder(t *testing.T) {
	n := newFakeNode(t)
	m, reg := n.manager(Config{})
	shop := fakePod("p1", "shop")
	web, db := fakeCtr(shop, "web", 110), fakeCtr(shop, "db", 120)
	other := fakePod("p2", "other")
	api2 := fakeCtr(other, "api", 210)
	n.spawn(shop.Linux.CgroupsPath, 100)
	n.spawn(cgroupOf(web), 110, 111, 112)
	n.spawn(cgroupOf(db), 120)
	n.spawn(other.Linux.CgroupsPath, 200)
	n.spawn(cgroupOf(api2), 210)
	shop.Pid, other.Pid = 100, 200

	steps := []struct {
		name  string
		do    func() error
		calls []string
	}{
		{"sandbox creates", func() error { return m.RunPodSandbox(ctx, shop) },
			[]string{"create 100 process", "get 100"}},
		{"web shares", func() error { return m.StartContainer(ctx, shop, web) },
			[]string{"get 100", "share 100>110 process"}},
		{"db shares", func() error { return m.StartContainer(ctx, shop, db) },
			[]string{"get 100", "share 100>120 process"}},
		{"other namespace creates", func() error { return m.StartContainer(ctx, other, api2) },
			[]string{"create 210 process", "get 210"}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := n.takeCalls(); !slices.Equal(got, s.calls) {
			t.Errorf("%s: calls %q, want %q", s.name, got, s.calls)
		}
	}
	a := n.cookieOf(100)
	for _, tid := range []int{110, 111, 112, 120} {
		if c := n.cookieOf(tid); c != a || c == 0 {
			t.Errorf("task %d: cookie %#x, want the shop group's %#x", tid, c, a)
		}
	}
	if b := n.cookieOf(210); b == a || b == 0 {
		t.Errorf("other group: cookie %#x, want its own (shop has %#x)", b, a)
	}
	if s := m.Status(); s.Groups != 2 || s.Members != 4 {
		t.Errorf("status %+v: want 2 groups, 4 members", s)
	}
	if got := testutil.ToFloat64(m.met.members.WithLabelValues("shop/p1", "web", "ns:shop", "ok")); got != 1 {
		t.Errorf("container metric = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "podfence_coresched_cookie_operations_total"); err != nil || n != 3 {
		t.Errorf("cookie operation series: %d, %v; want create/get/share ok", n, err)
	}
}

// TestStartFindsInit: without a pid from the runtime, the container's processes come from
// its cgroup's cgroup.procs (here a systemd-driver path).
func TestStartFindsInit(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{DefaultGroup: coresched.ByPod})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "app", 0)
	ctr.Linux.CgroupsPath = "kubepods-besteffort-podp1.slice:cri-containerd:abc"
	n.spawn("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podp1.slice/cri-containerd-abc.scope", 300)
	if err := m.StartContainer(ctx, pod, ctr); err != nil {
		t.Fatal(err)
	}
	if got := n.takeCalls(); !slices.Equal(got, []string{"create 300 process", "get 300"}) {
		t.Errorf("calls %q", got)
	}
	// A container whose cgroup is empty or missing is recorded as failed.
	gone := fakeCtr(pod, "gone", 0)
	if err := m.StartContainer(ctx, pod, gone); err == nil || !strings.Contains(err.Error(), "cgroup.procs: no such file") {
		t.Errorf("missing cgroup: err = %v", err)
	}
	if st := m.book.members[gone.Id].State; st != StateFailed {
		t.Errorf("state %q, want failed", st)
	}
}

// TestStartWithoutCookie: no cookie is made where none is wanted or possible.
func TestStartWithoutCookie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		probe  error
		labels []string
		def    coresched.DefaultGroup
		want   State
	}{
		{name: "policy none", labels: []string{coresched.LabelPolicy, "none"}, want: StateNone},
		{name: "default none", def: coresched.NoGroup, want: StateNone},
		{name: "no core scheduling, a group asked for", probe: kernel.ErrNoSchedCore, labels: []string{coresched.LabelGroup, "a"},
			want: StateUnsupported},
		{name: "no core scheduling, default group", probe: kernel.ErrNoSchedCore, want: ""},
		{name: "no core scheduling, policy none", probe: kernel.ErrNoSchedCore, labels: []string{coresched.LabelPolicy, "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newFakeNode(t)
			n.support.Err = tc.probe
			m, _ := n.manager(Config{DefaultGroup: tc.def, Policy: coresched.BestEffort})
			pod := fakePod("p1", "shop", tc.labels...)
			ctr := fakeCtr(pod, "app", 110)
			n.spawn(cgroupOf(ctr), 110)
			if err := m.StartContainer(ctx, pod, ctr); err != nil {
				t.Fatal(err)
			}
			if calls := n.takeCalls(); len(calls) != 0 {
				t.Errorf("calls %q: want none", calls)
			}
			mem, ok := m.book.members[ctr.Id]
			if st := mem.State; st != tc.want || ok != (tc.want != "") {
				t.Errorf("state %q (recorded %v), want %q (a node without cookies records only a member it reports)", st, ok, tc.want)
			}
		})
	}
}

// TestGuard: the guard turns Group Identity off before the first cookie; when it cannot, no
// cookie is created, the node reports unsupported, and explicit pods are refused.
func TestGuard(t *testing.T) {
	n := newFakeNode(t)
	gi := filepath.Join(n.proc, kernel.GroupIdentityFile)
	n.write(gi, "1\n")
	m, reg := n.manager(Config{})
	if b, _ := os.ReadFile(gi); string(b) != "0\n" {
		t.Errorf("group identity after New: %q, want 0", b)
	}
	// Group Identity comes back on in a way the guard cannot undo.
	if err := os.Remove(gi); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(gi, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := fakePod("p1", "shop", coresched.LabelGroup, "a")
	ctr := fakeCtr(pod, "app", 110)
	n.spawn(cgroupOf(ctr), 110)
	err := m.StartContainer(ctx, pod, ctr)
	if !errors.Is(err, kernel.ErrGroupIdentityOn) {
		t.Fatalf("start: %v, want ErrGroupIdentityOn", err)
	}
	if calls := n.takeCalls(); len(calls) != 0 {
		t.Errorf("kernel calls after a failed guard: %q", calls)
	}
	if st := m.book.members[ctr.Id].State; st != StateGuard {
		t.Errorf("state %q, want %q", st, StateGuard)
	}
	if _, err := m.CreateContainer(ctx, pod, fakeCtr(pod, "next", 0), plan.Decision{}); !errors.Is(err, kernel.ErrGroupIdentityOn) {
		t.Errorf("explicit pod after a failed guard: %v, want refused", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP podfence_coresched_supported 1 when this node can give containers core-scheduling cookies; else 0, with the reason.
# TYPE podfence_coresched_supported gauge
podfence_coresched_supported{reason="group_identity_on"} 0
`), "podfence_coresched_supported"); err != nil {
		t.Error(err)
	}
}

// TestLastMember: a group whose members all left forgets its cookie; a member that died
// without a remove event is no source; the next container creates a new cookie.
func TestLastMember(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	a, b, c := fakeCtr(pod, "a", 110), fakeCtr(pod, "b", 120), fakeCtr(pod, "c", 130)
	for _, x := range []*api.Container{a, b, c} {
		n.spawn(cgroupOf(x), int(x.Pid))
	}
	must(t, m.StartContainer(ctx, pod, a))
	must(t, m.StartContainer(ctx, pod, b))
	first := n.cookieOf(110)
	m.RemoveContainer(ctx, pod, a)
	n.kill(120) // b dies; no event yet
	n.takeCalls()
	must(t, m.StartContainer(ctx, pod, c))
	if got := n.takeCalls(); !slices.Equal(got, []string{"get 120", "create 130 process", "get 130"}) {
		t.Errorf("calls %q: want a failed source, then a new cookie", got)
	}
	if n.cookieOf(130) == first {
		t.Errorf("new member got the dead group's cookie %#x", first)
	}
	m.RemovePodSandbox(ctx, pod)
	if s := m.Status(); s.Groups != 0 || s.Members != 0 {
		t.Errorf("after the pod: %+v, want nothing recorded", s)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStartCgroupFromPid: a container whose runtime chose its cgroup itself (no cgroups
// path in the event) is found through its init's /proc/<pid>/cgroup: it gets its cookie, and
// a process that enters that cgroup later is repaired into its group.
func TestStartCgroupFromPid(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "app", 110)
	ctr.Linux.CgroupsPath = ""
	const path = "/runtime-chosen/app"
	n.spawn(path, 110, 111)
	must(t, m.StartContainer(ctx, pod, ctr))
	want := n.cookieOf(110)
	if want == 0 || n.cookieOf(111) != want {
		t.Fatalf("cookies %#x, %#x: want one new cookie", want, n.cookieOf(111))
	}
	n.spawn(path, 130)
	if rep := m.reconcile(false); rep.Repaired != 1 || n.cookieOf(130) != want {
		t.Errorf("reconcile %+v, pid 130 %#x: want it repaired to %#x", rep, n.cookieOf(130), want)
	}
	// Without a pid either, there is nothing to find the cgroup by.
	lost := fakeCtr(pod, "lost", 0)
	lost.Linux.CgroupsPath = ""
	if err := m.StartContainer(ctx, pod, lost); err == nil || !strings.Contains(err.Error(), "find the cgroup: empty cgroups path") {
		t.Errorf("no path, no pid: err = %v", err)
	}
}

// TestStartEveryProcess: every process already in a container's cgroup gets the cookie, for
// the member that creates the group's cookie and for one that shares it.
func TestStartEveryProcess(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	web, db := fakeCtr(pod, "web", 110), fakeCtr(pod, "db", 120)
	n.spawn(cgroupOf(web), 110)
	n.spawn(cgroupOf(web), 115, 116)
	n.spawn(cgroupOf(db), 120)
	n.spawn(cgroupOf(db), 125)
	n.spawn(cgroupOf(db), 127)
	must(t, m.StartContainer(ctx, pod, web))
	must(t, m.StartContainer(ctx, pod, db))
	want := n.cookieOf(110)
	for _, tid := range []int{115, 116, 120, 125, 127} {
		if c := n.cookieOf(tid); c != want || c == 0 {
			t.Errorf("task %d: cookie %#x, want the group's %#x", tid, c, want)
		}
	}
}

// TestContainerWithoutSandboxID: a container event that names no pod sandbox belongs to the
// pod of the event: the pod sandbox's removal forgets it.
func TestContainerWithoutSandboxID(t *testing.T) {
	n := newFakeNode(t)
	m, reg := n.manager(Config{})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "app", 110)
	ctr.PodSandboxId = ""
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	m.RemovePodSandbox(ctx, pod)
	if s := m.Status(); s.Members != 0 || s.Groups != 0 {
		t.Errorf("after the pod sandbox's removal: %+v, want nothing recorded", s)
	}
	if n, err := testutil.GatherAndCount(reg, "podfence_coresched_container"); err != nil || n != 0 {
		t.Errorf("%d member series left, %v", n, err)
	}
}
