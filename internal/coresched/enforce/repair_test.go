package enforce

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

// started returns a manager with one shop container (pid 110, threads 111 112) holding the
// group's cookie, and the container's cgroup.
func started(t *testing.T, n *fakeNode) (*Manager, string) {
	t.Helper()
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110, 111, 112)
	must(t, m.StartContainer(ctx, pod, ctr))
	n.takeCalls()
	return m, cgroupOf(ctr)
}

// TestReconcile: a process that entered the cgroup without the cookie is repaired whole; a
// process with one wrong thread is repaired thread by thread; a healthy one only read.
func TestReconcile(t *testing.T) {
	n := newFakeNode(t)
	var repairs []Repair
	m, _ := n.manager(Config{OnRepair: func(r Repair) { repairs = append(repairs, r) }})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110, 111, 112)
	must(t, m.StartContainer(ctx, pod, ctr))
	want := n.cookieOf(110)
	n.spawn(cgroupOf(ctr), 130, 131) // kubectl exec, missed by the watcher
	n.spawn(cgroupOf(ctr), 140)      // a single-threaded one: the process too
	n.setCookie(0xbad, 112)          // one thread changed behind the agent's back
	n.takeCalls()

	rep := m.reconcile(false)
	if rep.Members != 1 || rep.Tasks != 6 || rep.Repaired != 4 || rep.Exited != 0 || len(rep.Errs) != 0 {
		t.Errorf("report %+v: want 1 member, 6 tasks, 4 repaired", rep)
	}
	for _, tid := range []int{110, 111, 112, 130, 131, 140} {
		if c := n.cookieOf(tid); c != want {
			t.Errorf("task %d: %#x, want %#x", tid, c, want)
		}
	}
	var shares []string
	for _, c := range n.takeCalls() {
		if c[:5] == "share" {
			shares = append(shares, c)
		}
	}
	if !slices.Equal(shares, []string{"share 110>112 thread", "share 110>130 process", "share 110>140 process"}) {
		t.Errorf("shares %q", shares)
	}
	if len(repairs) != 3 || repairs[1].By != "reconcile" || repairs[1].Scope != kernel.Process {
		t.Errorf("repairs %+v", repairs)
	}
	if got := testutil.ToFloat64(m.met.repaired.WithLabelValues("reconcile")); got != 4 {
		t.Errorf("repaired metric %v, want 4", got)
	}

	// A healthy container costs one GET per task and nothing else.
	rep = m.reconcile(false)
	calls := n.takeCalls()
	if rep.Repaired != 0 || len(calls) != 6 {
		t.Errorf("second pass: %+v, calls %q", rep, calls)
	}

	// All processes gone: the member is forgotten, and its group with it.
	n.kill(110)
	n.kill(130)
	n.kill(140)
	if rep := m.reconcile(false); rep.Exited != 1 || m.Status().Groups != 0 {
		t.Errorf("after exit: %+v, status %+v", rep, m.Status())
	}
}

// TestHandle: the watcher repairs a task that appears in a member's cgroup without the
// cookie, and leaves everything else alone.
func TestHandle(t *testing.T) {
	n := newFakeNode(t)
	var repairs []Repair
	m, _ := n.manager(Config{OnRepair: func(r Repair) { repairs = append(repairs, r) }})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	want := n.cookieOf(110)
	n.spawn(cgroupOf(ctr), 140, 141)
	n.spawn("/system.slice/sshd.service", 150)
	n.takeCalls()
	now := uint64(procevents.Now())

	for _, tc := range []struct {
		name  string
		ev    procevents.Event
		calls []string
	}{
		{name: "exit: ignored", ev: procevents.Event{What: procevents.Exit, Pid: 140, Tgid: 140}},
		{name: "not in a container", ev: procevents.Event{What: procevents.Exec, Pid: 150, Tgid: 150}},
		{name: "gone already", ev: procevents.Event{What: procevents.Exec, Pid: 160, Tgid: 160}},
		{name: "exec without cookie", ev: procevents.Event{What: procevents.Exec, Time: now, Pid: 140, Tgid: 140},
			calls: []string{"get 140", "get 110", "share 110>140 process"}},
		{name: "exec with the cookie", ev: procevents.Event{What: procevents.Exec, Pid: 140, Tgid: 140},
			calls: []string{"get 140"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.handle(tc.ev, m.k.Share)
			if got := n.takeCalls(); !slices.Equal(got, tc.calls) {
				t.Errorf("calls %q, want %q", got, tc.calls)
			}
		})
	}
	if n.cookieOf(141) != want {
		t.Errorf("thread 141 of the repaired process: %#x, want %#x", n.cookieOf(141), want)
	}
	n.setCookie(0, 141)
	m.handle(procevents.Event{What: procevents.Fork, ParentPid: 140, ParentTgid: 140, Pid: 141, Tgid: 140}, m.k.Share)
	if got := n.takeCalls(); !slices.Equal(got, []string{"get 141", "get 110", "share 110>141 thread"}) {
		t.Errorf("new thread: calls %q", got)
	}
	// The delay runs from the event's kernel time to the repair: no longer than the test's wait.
	if since := time.Duration(procevents.Now() - int64(now)); len(repairs) != 2 || repairs[0].Event != "exec" ||
		repairs[0].Delay <= 0 || repairs[0].Delay > since || repairs[1].Scope != kernel.Thread {
		t.Errorf("repairs %+v, want the exec's delay within %s", repairs, since)
	}
	if got := testutil.CollectAndCount(m.met.delay); got != 2 {
		t.Errorf("delay histogram series %d, want exec and fork", got)
	}
}

// TestRepairErrors: kernel errors are reported, a vanished task is not.
func TestRepairErrors(t *testing.T) {
	n := newFakeNode(t)
	m, path := started(t, n)
	n.spawn(path, 130)
	n.fail["share"] = kernel.ErrNoPermission
	rep := m.reconcile(false)
	if len(rep.Errs) != 1 || !errors.Is(rep.Errs[0], kernel.ErrNoPermission) {
		t.Errorf("errors %v: want ErrNoPermission", rep.Errs)
	}
	n.fail["share"] = kernel.ErrNoTask
	if rep := m.reconcile(false); len(rep.Errs) != 0 || rep.Repaired != 0 {
		t.Errorf("vanished task: %+v", rep)
	}
	if got := testutil.ToFloat64(m.met.ops.WithLabelValues("share", "no_permission")); got != 1 {
		t.Errorf("share/no_permission = %v", got)
	}
}

// TestRun: the periodic reconcile repairs what appears, and Run ends with its context.
func TestRun(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{ReconcileEvery: 5 * time.Millisecond})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	n.spawn(cgroupOf(ctr), 130)
	c, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- m.Run(c) }()
	testwait.Eventually(t, "the reconcile's repair of pid 130", func() bool { return n.cookieOf(130) == n.cookieOf(110) })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	off, _ := newFakeNode(t).manager(Config{Disabled: true})
	if err := off.Run(ctx); err != nil || off.Status().Err != errDisabled {
		t.Errorf("disabled: Run %v, status %+v", err, off.Status())
	}
}

// TestSharedCgroup: containers of one pod can share one cgroup (a VM sandbox's pod cgroup
// under Kata's sandbox_cgroup_only): when one of them is removed, a process that enters the
// cgroup still gets the group's cookie from the watcher.
func TestSharedCgroup(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	a, b := fakeCtr(pod, "a", 110), fakeCtr(pod, "b", 120)
	a.Linux.CgroupsPath, b.Linux.CgroupsPath = "/kubepods/podp1", "/kubepods/podp1"
	n.spawn("/kubepods/podp1", 110)
	must(t, m.StartContainer(ctx, pod, a))
	n.spawn("/kubepods/podp1", 120)
	must(t, m.StartContainer(ctx, pod, b))
	want := n.cookieOf(110)
	m.RemoveContainer(ctx, pod, a)
	n.spawn("/kubepods/podp1", 130)
	m.handle(procevents.Event{What: procevents.Exec, Pid: 130, Tgid: 130}, m.k.Share)
	if got := n.cookieOf(130); got != want || got == 0 {
		t.Errorf("exec in the shared cgroup after a's removal: %#x, want b's group's %#x", got, want)
	}
}
