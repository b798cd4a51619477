package enforce

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

// TestQEMUManager drives the manager through a pod lifecycle on the real kernel: two
// groups, the no-window start, inheritance, the watcher, the reconcile, the agent's own
// threads, restart recovery and a group's last member.
func TestQEMUManager(t *testing.T) {
	needQEMU(t)
	waitReadable(t)
	k := &counting{Kernel: kernel.Prctl{}}
	repairs := make(chan Repair, 4096)
	cfg := Config{ReconcileEvery: time.Hour, OnRepair: func(r Repair) { repairs <- r }}
	m, err := New(cfg, k, prometheus.NewRegistry(), logger(t))
	must(t, err)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = m.Run(ctx) }()
	noEvents := processEvents(t)
	if noEvents == nil {
		testwait.EventuallyNil(t, "watcher subscribed", func() error {
			if !m.Status().Watching {
				return fmt.Errorf("status %+v", m.Status())
			}
			return nil
		})
	}

	shop, other := fakePod("a", "shop"), fakePod("b", "other")
	a1, a2, b1 := fakeCtr(shop, "a1", 0), fakeCtr(shop, "a2", 0), fakeCtr(other, "b1", 0)
	cgroup(t, "/kubepods/poda")
	cgroup(t, "/kubepods/podb")
	sa := inCgroup(t, shop.Linux.CgroupsPath, "sleep")
	ha1 := inCgroup(t, cgroupOf(a1), "exec")
	ha2 := inCgroup(t, cgroupOf(a2), "spawn")
	sb := inCgroup(t, other.Linux.CgroupsPath, "sleep")
	hb1 := inCgroup(t, cgroupOf(b1), "sleep")
	shop.Pid, other.Pid, a2.Pid, b1.Pid = uint32(sa.pid), uint32(sb.pid), uint32(ha2.pid), uint32(hb1.pid)

	startMember(t, k, "pod sandbox shop/a (first of group ns:shop: create)", func() error { return m.RunPodSandbox(ctx, shop) })
	startMember(t, k, "container a1 (pid from cgroup.procs: share)", func() error { return m.StartContainer(ctx, shop, a1) })
	startMember(t, k, "container a2 (pid from the runtime: share)", func() error { return m.StartContainer(ctx, shop, a2) })
	startMember(t, k, "pod sandbox other/b (create)", func() error { return m.RunPodSandbox(ctx, other) })
	startMember(t, k, "container b1 (share)", func() error { return m.StartContainer(ctx, other, b1) })

	cA, cB := cookieOf(t, sa.pid), cookieOf(t, sb.pid)
	for _, h := range []*child{ha1, ha2} {
		if c := cookieOf(t, h.pid); c != cA || c == 0 {
			t.Fatalf("shop member %d: cookie %s, want the sandbox's %s", h.pid, cookieHex(c), cookieHex(cA))
		}
	}
	t.Logf("FACT members of one group share one cookie: group ns:shop %s on every thread of sandbox %d, a1 %d, a2 %d",
		cookieHex(cA), sa.pid, ha1.pid, ha2.pid)
	if c := cookieOf(t, hb1.pid); c != cB || cB == 0 || cB == cA {
		t.Fatalf("group other: sandbox %s, b1 %s; shop %s", cookieHex(cB), cookieHex(c), cookieHex(cA))
	}
	t.Logf("FACT two groups get different cookies: ns:shop %s, ns:other %s", cookieHex(cA), cookieHex(cB))

	// No window: a1 was given the cookie before its "entrypoint" (exec) ran.
	_, err = fmt.Fprintln(ha1.stdin, "go")
	must(t, err)
	must(t, ha1.waitReady())
	if ha1.ready != cookieHex(cA) {
		t.Fatalf("a1's entrypoint started with cookie %s, want %s", ha1.ready, cookieHex(cA))
	}
	t.Logf("FACT no window: a1's entrypoint (exec after StartContainer) read cookie %s at its first line", ha1.ready)

	// Children inherit: a2 forks and execs a child, which needs no repair.
	_, err = fmt.Fprintln(ha2.stdin, "go")
	must(t, err)
	line, err := ha2.line()
	must(t, err)
	var kid int
	var kidReady string
	if _, err := fmt.Sscan(line, &kid, &kidReady); err != nil {
		t.Fatalf("spawner said %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(kid, syscall.SIGKILL) })
	if c := cookieOf(t, kid); c != cA || kidReady != cookieHex(cA) {
		t.Fatalf("a2's child %d: cookie %s (at start %s), want %s", kid, cookieHex(c), kidReady, cookieHex(cA))
	}
	t.Logf("FACT children inherit: a2's child %d (fork+exec) started with %s", kid, kidReady)

	t.Run("watcher", func(t *testing.T) {
		if noEvents != nil {
			t.Skip(noEvents)
		}
		k.mu.Lock()
		k.shares = nil
		k.mu.Unlock()
		watcherExecs(t, repairs, cgroupOf(b1), cB, 50)
		k.mu.Lock()
		defer k.mu.Unlock()
		t.Logf("FACT of that delay, Share (a throw-away thread: SHARE_FROM, SHARE_TO, waiting for it to end) took p50 %s, p99 %s over %d calls",
			percentile(k.shares, 0.5), percentile(k.shares, 0.99), len(k.shares))
	})
	reconcileCatches(t, m, cgroupOf(a1), cA, func() { watcherFence(t, repairs, noEvents, cgroupOf(a1)) })
	t.Logf("FACT the agent's own threads stay at cookie 0: all %d threads of pid %d", checkOwnThreads(t), os.Getpid())

	stop() // the first agent goes away; its tasks stay
	testwait.EventuallyNil(t, "watcher stopped", func() error {
		if m.Status().Watching {
			return fmt.Errorf("still watching")
		}
		return nil
	})
	pods := []*api.PodSandbox{shop, other}
	ctrs := []*api.Container{a1, a2, b1}
	healthy := map[int]kernel.Cookie{sa.pid: cA, ha2.pid: cA, kid: cA, sb.pid: cB, hb1.pid: cB}
	m2 := restart(t, pods, ctrs, healthy, ha1.pid, cA)
	lastMember(t, m2, other, []int{sb.pid, hb1.pid}, cB)
}

// processEvents returns why the kernel has no process events (no CONFIG_PROC_EVENTS), or
// nil; other subscription errors fail the test.
func processEvents(t *testing.T) error {
	c, err := procevents.Open(2 * time.Second)
	switch {
	case errors.Is(err, unix.EPROTONOSUPPORT):
		return fmt.Errorf("this kernel has no process events: add CONFIG_CONNECTOR=y and CONFIG_PROC_EVENTS=y "+
			"to the kernel config fragment (hack/qemu/podfence-kernel.config): %w", err)
	case err != nil:
		t.Fatalf("subscribe to process events: %v", err)
	}
	must(t, c.Close())
	return nil
}

// watcherExecs moves n fresh processes into a container's cgroup and lets each exec, as
// runc exec does; the watcher must give each its group's cookie. It logs the delays.
func watcherExecs(t *testing.T, repairs chan Repair, path string, want kernel.Cookie, n int) {
	var delays []time.Duration
	late := 0
	for i := range n {
		h, err := startHelper("exec", nil)
		must(t, err)
		moveTo(t, path, h.pid)
		_, err = fmt.Fprintln(h.stdin, "go")
		must(t, err)
		delays = append(delays, execRepair(t, repairs, h, fmt.Sprintf("exec %d", i)))
		must(t, h.waitReady())
		if h.ready != cookieHex(want) {
			late++
		}
		testwait.EventuallyNil(t, "helper threads", func() error {
			if c, err := processCookie(h.pid); err != nil || c != want {
				return fmt.Errorf("pid %d: %s, %v", h.pid, cookieHex(c), err)
			}
			return nil
		})
		h.stop()
	}
	t.Logf("FACT watcher: %d/%d processes that entered a container cgroup and exec'd got the group's cookie %s; "+
		"exec-to-cookie delay p50 %s, p99 %s, max %s; %d of them read cookie 0 at their first line (the exec window)",
		len(delays), n, cookieHex(want), percentile(delays, 0.5), percentile(delays, 0.99), percentile(delays, 1), late)
}

// execRepair waits for the watcher's repair of helper h's exec and returns its delay.
func execRepair(t *testing.T, repairs chan Repair, h *child, what string) time.Duration {
	t.Helper()
	deadline := time.NewTimer(time.Until(testwait.Deadline(t)))
	defer deadline.Stop()
	for {
		select {
		case r := <-repairs:
			if r.Pid == h.pid && r.Event == "exec" {
				return r.Delay
			}
		case <-deadline.C:
			h.stop()
			t.Fatalf("%s: no watcher repair of pid %d", what, h.pid)
		}
	}
}

// watcherFence returns once the watcher has handled every process event that came before
// the call: it moves a fresh helper into the container cgroup path, lets it exec and waits
// for the watcher's repair of that exec (the watcher handles events in order). Without a
// watcher (no process events) it returns at once: nothing else acts on tasks between two
// reconciles.
func watcherFence(t *testing.T, repairs chan Repair, noEvents error, path string) {
	t.Helper()
	if noEvents != nil {
		return
	}
	h, err := startHelper("exec", nil)
	must(t, err)
	defer h.stop()
	moveTo(t, path, h.pid)
	_, err = fmt.Fprintln(h.stdin, "go")
	must(t, err)
	execRepair(t, repairs, h, "fence")
	must(t, h.waitReady())
}

// reconcileCatches moves a running process into a cgroup: no exec, so no event for its
// existing threads (the watcher still sees threads it starts later). The reconcile
// repairs the rest. fence returns once the watcher has handled every earlier event.
func reconcileCatches(t *testing.T, m *Manager, path string, want kernel.Cookie, fence func()) {
	h := startChild(t, "sleep")
	fence() // the watcher has seen h's fork and exec, outside the container
	moveTo(t, path, h.pid)
	fence() // and every event since: the move itself gave h's threads nothing
	tids, err := procFS{root: "/proc"}.threads(h.pid)
	must(t, err)
	without := 0
	for _, tid := range tids {
		if c, err := (kernel.Prctl{}).Get(tid); err == nil && c != want {
			without++
		}
	}
	rep := m.reconcile(false)
	if c := cookieOf(t, h.pid); c != want || without == 0 || rep.Repaired != without {
		t.Fatalf("reconcile %+v after %d of %d threads lacked it: pid %d has %s, want %s",
			rep, without, len(tids), h.pid, cookieHex(c), cookieHex(want))
	}
	t.Logf("FACT reconcile: pid %d moved in without exec: %d of its %d threads lacked the cookie until the reconcile "+
		"gave them %s (%d tasks checked)", h.pid, without, len(tids), cookieHex(want), rep.Tasks)
}

// restart runs a second manager over the live tasks after giving one member (conflict) a
// cookie of its own: healthy members are only read, and the conflict converges to its
// group's majority cookie.
func restart(t *testing.T, pods []*api.PodSandbox, ctrs []*api.Container, healthy map[int]kernel.Cookie, conflict int,
	groupCookie kernel.Cookie) *Manager {
	must(t, kernel.Prctl{}.Create(conflict, kernel.Process))
	k := &counting{Kernel: kernel.Prctl{}}
	m, err := New(Config{ReconcileEvery: time.Hour}, k, prometheus.NewRegistry(), logger(t))
	must(t, err)
	k.take()
	must(t, m.Synchronize(context.Background(), pods, ctrs))
	calls, n := k.take()
	if calls["create"] != 0 || calls["share"] != 1 {
		t.Fatalf("restart calls %v: want no create and one share (the conflict)", calls)
	}
	for pid, c := range healthy {
		if got := cookieOf(t, pid); got != c {
			t.Fatalf("restart changed pid %d: %s, want %s", pid, cookieHex(got), cookieHex(c))
		}
	}
	if got := cookieOf(t, conflict); got != groupCookie {
		t.Fatalf("conflicting member %d: %s, want the group's %s", conflict, cookieHex(got), cookieHex(groupCookie))
	}
	t.Logf("FACT restart recovery: a new manager kept the cookies of %d healthy processes untouched "+
		"(%d prctl calls: %v) and converged pid %d's conflicting cookie to its group's %s",
		len(healthy), n, calls, conflict, cookieHex(groupCookie))
	return m
}

// lastMember ends every process of pod's group: the group forgets its cookie, and the
// pod's next container creates a new one.
func lastMember(t *testing.T, m *Manager, pod *api.PodSandbox, pids []int, old kernel.Cookie) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	testwait.EventuallyNil(t, "group without members", func() error {
		m.reconcile(false)
		if s := m.Status(); s.Groups != 1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	next := fakeCtr(pod, "next", 0)
	h := inCgroup(t, cgroupOf(next), "sleep")
	must(t, m.StartContainer(context.Background(), pod, next))
	c := cookieOf(t, h.pid)
	if c == old || c == 0 {
		t.Fatalf("after its last member died, the group's next container got %s (old %s)", cookieHex(c), cookieHex(old))
	}
	t.Logf("FACT last member: the group forgot cookie %s with its last member; its next container got a new one, %s",
		cookieHex(old), cookieHex(c))
}
