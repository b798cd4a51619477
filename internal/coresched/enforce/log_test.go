package enforce

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/testwait"
)

// logLines returns the lines of the log that hold every one of parts.
func logLines(log *syncBuffer, parts ...string) []string {
	var out []string
	for _, line := range strings.Split(log.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// wantLines fails t unless the log has exactly n lines holding every one of parts.
func wantLines(t *testing.T, log *syncBuffer, n int, parts ...string) {
	t.Helper()
	if got := logLines(log, parts...); len(got) != n {
		t.Errorf("%d log lines with %q, want %d:\n%s", len(got), parts, n, log)
	}
}

// TestLogStartup: the agent says once at start whether cookies are on, with its settings
// (the defaults filled in), or why not.
func TestLogStartup(t *testing.T) {
	n := newFakeNode(t)
	_, log := n.managerLogged(Config{})
	wantLines(t, log, 1, `level=INFO msg="core scheduling on" policy=strict defaultGroup=namespace`, "reconcileEvery=10s")
	wantLines(t, log, 0, "unavailable")

	_, log = newFakeNode(t).managerLogged(Config{ReconcileEvery: 5 * time.Millisecond, Policy: coresched.BestEffort})
	wantLines(t, log, 1, `msg="core scheduling on" policy=best-effort`, "reconcileEvery=5ms")

	off := newFakeNode(t)
	off.support.Err = kernel.ErrNoSMT
	_, log = off.managerLogged(Config{})
	wantLines(t, log, 1, `level=WARN msg="core scheduling unavailable: containers run without cookies"`,
		`reason="probe: no SMT: core scheduling needs sibling hyperthreads"`, "explicitGroups=refused")
	wantLines(t, log, 0, `msg="core scheduling on"`)
}

// TestLogMembers: a member given its cookie is logged with its pid; one without a cookie is
// not; a pod sandbox that could not get its cookie is a warning; the last member of a group
// leaving is logged, with the group, and no other leaving is.
func TestLogMembers(t *testing.T) {
	n := newFakeNode(t)
	m, log := n.managerLogged(Config{})
	shop := fakePod("p1", "shop")
	shop.Pid = 100
	web, db := fakeCtr(shop, "web", 110), fakeCtr(shop, "db", 120)
	alone := fakePod("p2", "shop", coresched.LabelPolicy, coresched.PolicyNone)
	plain := fakeCtr(alone, "plain", 210)
	n.spawn(shop.Linux.CgroupsPath, 100)
	n.spawn(cgroupOf(web), 110)
	n.spawn(cgroupOf(db), 120)
	n.spawn(cgroupOf(plain), 210)

	must(t, m.RunPodSandbox(ctx, shop))
	must(t, m.StartContainer(ctx, shop, web))
	must(t, m.StartContainer(ctx, alone, plain))
	wantLines(t, log, 1, `msg="core scheduling cookie" pod=shop/p1 container=web group=ns:shop pid=110 tasks=1`)
	wantLines(t, log, 1, `msg="core scheduling cookie" pod=shop/p1 container="" group=ns:shop pid=100`)
	wantLines(t, log, 0, "container=plain")
	wantLines(t, log, 0, "pod sandbox without its cookie")

	failing := fakePod("p3", "other")
	failing.Pid = 300
	n.spawn(failing.Linux.CgroupsPath, 300)
	n.failNext("create", kernel.ErrNoPermission)
	must(t, m.RunPodSandbox(ctx, failing)) // logged, never returned
	wantLines(t, log, 1, `level=WARN msg="core scheduling: pod sandbox without its cookie" pod=other/p3`, "no permission")

	must(t, m.StartContainer(ctx, shop, db))
	m.RemoveContainer(ctx, shop, web)
	m.RemoveContainer(ctx, shop, db)
	wantLines(t, log, 0, "no member left")
	m.RemovePodSandbox(ctx, shop)
	wantLines(t, log, 1, `msg="core scheduling group has no member left; its cookie is forgotten" group=ns:shop`)
}

// TestLogIdle: cpu.idle set is logged with the cgroup; cpu.idle that could not be set is a
// warning with the reason.
func TestLogIdle(t *testing.T) {
	qos, err := coresched.ParseQoS("BE=on+idle")
	must(t, err)
	n := idleNode(t, "be")
	m, log := n.managerLogged(Config{QoS: qos})
	must(t, m.RunPodSandbox(ctx, fakePod("be", "batch", coresched.KoordLabelQoS, "BE")))
	wantLines(t, log, 1, `level=INFO msg="cpu.idle set" pod=batch/be class=BE cgroup=`+n.cg+"/kubepods/podbe")
	wantLines(t, log, 0, "cpu.idle not set")

	must(t, m.RunPodSandbox(ctx, fakePod("gone", "batch", coresched.KoordLabelQoS, "BE"))) // no cgroup
	wantLines(t, log, 1, `level=WARN msg="cpu.idle not set: the pod runs at normal CPU priority" pod=batch/gone class=BE`)
	wantLines(t, log, 1, "cpu.idle set")
}

// TestLogSynchronize: a restarted agent says what it rebuilt: groups, cookies created,
// members with and without a cookie, tasks repaired.
func TestLogSynchronize(t *testing.T) {
	n := newFakeNode(t)
	shop, other := fakePod("p1", "shop"), fakePod("p2", "other", coresched.LabelPolicy, coresched.PolicyNone)
	a, b, c := fakeCtr(shop, "a", 110), fakeCtr(shop, "b", 120), fakeCtr(other, "c", 210)
	for _, x := range []*api.Container{a, b, c} {
		n.spawn(cgroupOf(x), int(x.Pid))
	}
	m, log := n.managerLogged(Config{})
	must(t, m.Synchronize(ctx, []*api.PodSandbox{shop, other}, []*api.Container{a, b, c}))
	wantLines(t, log, 1, `msg="core scheduling restored from live tasks" groups=1 created=1 members=2 "without cookie"=1 repaired=1`)
}

// TestLogReconcile: the periodic pass is logged only when it did something: tasks repaired,
// errors, members gone. A pass over healthy members says nothing.
func TestLogReconcile(t *testing.T) {
	n := newFakeNode(t)
	m, log := n.managerLogged(Config{ReconcileEvery: time.Millisecond})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	n.takeCalls()
	c, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(c) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	gets := 0 // a pass over the healthy member reads its one task
	testwait.Eventually(t, "three reconcile passes", func() bool {
		for _, call := range n.takeCalls() {
			if call == "get 110" {
				gets++
			}
		}
		return gets >= 3
	})
	wantLines(t, log, 0, "core scheduling reconcile")

	n.failNext("share", kernel.ErrNoPermission)
	n.spawn(cgroupOf(ctr), 130)
	testwait.Eventually(t, "the repair of pid 130", func() bool { return n.cookieOf(130) == n.cookieOf(110) })
	testwait.Eventually(t, "the repair logged", func() bool {
		return len(logLines(log, `msg="core scheduling reconcile" members=1 tasks=2 repaired=1 exited=0`)) == 1
	})
	wantLines(t, log, 1, `msg="core scheduling reconcile" members=1 tasks=2 repaired=0 exited=0`, "no permission")

	n.kill(110)
	n.kill(130)
	testwait.Eventually(t, "the exit logged", func() bool {
		return len(logLines(log, `msg="core scheduling reconcile" members=0 tasks=0 repaired=0 exited=1`)) == 1
	})
	if s := m.Status(); s.Err != nil || s.Members != 0 {
		t.Errorf("status %+v: want the member forgotten", s)
	}
}
