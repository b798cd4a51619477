package kernel

// Real-kernel tests: they need SMT and CONFIG_SCHED_CORE (the QEMU guest of
// hack/qemu/run-go-test.sh has both, and says so with PODFENCE_IN_QEMU=1; a host with both
// runs them too: they touch only the cookies of their own child processes). They are not
// behind a build tag, so that go vet and staticcheck check them on every run.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/testwait"
)

// needQEMU skips unless this kernel has SMT active and core scheduling usable by this
// process; in the QEMU guest, built to have both, a missing one fails the test instead.
func needQEMU(t *testing.T) {
	t.Helper()
	missing := ""
	smt, err := os.ReadFile("/sys/devices/system/cpu/smt/active")
	switch {
	case err != nil:
		missing = fmt.Sprintf("SMT state unknown: %v", err)
	case strings.TrimSpace(string(smt)) != "1":
		missing = "SMT is not active (/sys/devices/system/cpu/smt/active: " + strings.TrimSpace(string(smt)) + ")"
	default:
		if s := (Prctl{}).Probe(); !s.Available() {
			missing = fmt.Sprintf("core scheduling is unavailable (CONFIG_SCHED_CORE, root): %v", s.Err)
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("PODFENCE_IN_QEMU") == "1" {
		t.Fatalf("the QEMU guest's kernel is built for core scheduling, but %s", missing)
	}
	t.Skipf("needs SMT and CONFIG_SCHED_CORE (hack/qemu/run-go-test.sh ./coresched/kernel has both): %s", missing)
}

// waitReadable waits until GET shows cookies (they read 0 for a few seconds after boot).
func waitReadable(t *testing.T) {
	t.Helper()
	start := time.Now()
	testwait.EventuallyNil(t, "probe", func() error {
		s := Prctl{}.Probe()
		if s.Err != nil {
			t.Fatalf("probe: %v", s.Err)
		}
		if !s.Readable {
			return errors.New("probe cookie reads 0")
		}
		return nil
	})
	t.Logf("cookies readable after waiting %s", time.Since(start).Round(time.Millisecond))
}

// cookieOf reads the cookie of every thread of process pid and fails unless all are equal.
func cookieOf(t *testing.T, pid int) Cookie {
	t.Helper()
	tids := tasks(t, "/proc", pid)
	var first Cookie
	for i, tid := range tids {
		c, err := Prctl{}.Get(tid)
		if err != nil {
			t.Fatalf("get thread %d of %d: %v", tid, pid, err)
		}
		if i == 0 {
			first = c
		} else if c != first {
			t.Fatalf("pid %d: thread %d has cookie %#x, thread %d has %#x", pid, tids[0], first, tid, c)
		}
	}
	return first
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestQEMUSMTSiblings(t *testing.T) {
	needQEMU(t)
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
	must(t, "read cpu0 siblings", err)
	if s := strings.TrimSpace(string(b)); !strings.ContainsAny(s, ",-") {
		t.Fatalf("cpu0 thread siblings %q: want two or more threads per core", s)
	}
	s := Prctl{}.Probe()
	t.Logf("probe: %v", s)
	if !s.Available() {
		t.Fatalf("core scheduling unavailable in the guest: %v", s.Err)
	}
}

func TestQEMUCookies(t *testing.T) {
	needQEMU(t)
	waitReadable(t)
	k := Prctl{}

	a := startChild(t, "sleep", nil)
	if n := len(tasks(t, "/proc", a.pid)); n < 4 {
		t.Fatalf("helper %d has %d threads, want >= 4", a.pid, n)
	}
	if c := cookieOf(t, a.pid); c != 0 {
		t.Fatalf("fresh child %d has cookie %#x, want 0", a.pid, c)
	}
	must(t, "create a", k.Create(a.pid, Process))
	ca := cookieOf(t, a.pid)
	if ca == 0 {
		t.Fatalf("created cookie reads 0")
	}
	t.Logf("A pid %d: cookie %#x on all %d threads", a.pid, ca, len(tasks(t, "/proc", a.pid)))

	b := startChild(t, "sleep", nil)
	must(t, "share a to b", k.Share(a.pid, b.pid, Process))
	if cb := cookieOf(t, b.pid); cb != ca {
		t.Fatalf("B after Share(A): cookie %#x, want A's %#x", cb, ca)
	}
	t.Logf("B pid %d: shares A's cookie", b.pid)

	c := startChild(t, "sleep", nil)
	must(t, "create c", k.Create(c.pid, Process))
	cc := cookieOf(t, c.pid)
	if cc == 0 || cc == ca {
		t.Fatalf("C after its own Create: cookie %#x, want non-zero and not A's %#x", cc, ca)
	}
	t.Logf("C pid %d: own cookie %#x", c.pid, cc)

	// Thread scope: one thread of C gets its own cookie, its siblings keep C's.
	tids := tasks(t, "/proc", c.pid)
	must(t, "create thread", k.Create(tids[1], Thread))
	if ct, _ := k.Get(tids[1]); ct == cc || ct == 0 {
		t.Fatalf("thread %d after Create(Thread): %#x, want new cookie", tids[1], ct)
	}
	if c0, _ := k.Get(tids[0]); c0 != cc {
		t.Fatalf("thread %d changed with its sibling: %#x, want %#x", tids[0], c0, cc)
	}
	t.Logf("C thread %d: own cookie (Thread scope), thread %d keeps C's", tids[1], tids[0])

	must(t, "clear b", k.Clear(b.pid, Process))
	if cb := cookieOf(t, b.pid); cb != 0 {
		t.Fatalf("B after Clear: cookie %#x, want 0", cb)
	}
	if got := cookieOf(t, a.pid); got != ca {
		t.Fatalf("A changed by B's Clear: %#x, want %#x", got, ca)
	}
	t.Log("Clear(B) left A alone")
	checkOwnThreads(t)
}

// TestQEMUInherit: a child forked and exec'd by a cookied process carries its cookie; a
// process group shares one cookie with ProcessGroup scope.
func TestQEMUInherit(t *testing.T) {
	needQEMU(t)
	waitReadable(t)
	k := Prctl{}
	s := startChild(t, "spawn", &syscall.SysProcAttr{Setpgid: true})
	must(t, "create spawner", k.Create(s.pid, Process))
	cs := cookieOf(t, s.pid)
	_, err := fmt.Fprintln(s.stdin, "go")
	must(t, "tell spawner", err)
	line, err := s.line()
	must(t, "read grandchild pid", err)
	var g int
	if _, err := fmt.Sscan(line, &g); err != nil {
		t.Fatalf("spawner said %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(g, syscall.SIGKILL) })
	if cg := cookieOf(t, g); cg != cs || cg == 0 {
		t.Fatalf("grandchild %d (fork+exec of %d): cookie %#x, want %#x", g, s.pid, cg, cs)
	}
	t.Logf("grandchild %d inherited spawner %d's cookie %#x over fork+exec", g, s.pid, cs)

	must(t, "create group", k.Create(s.pid, ProcessGroup))
	cs2, cg2 := cookieOf(t, s.pid), cookieOf(t, g)
	if cs2 != cg2 || cs2 == cs || cs2 == 0 {
		t.Fatalf("after Create(ProcessGroup): spawner %#x, grandchild %#x, old %#x", cs2, cg2, cs)
	}
	t.Logf("process group %d: one new cookie %#x", s.pid, cs2)
	checkOwnThreads(t)
}

// TestQEMUErrors: the kernel's ESRCH and EPERM reach callers as ErrNoTask and ErrNoPermission.
func TestQEMUErrors(t *testing.T) {
	needQEMU(t)
	k := Prctl{}
	live := startChild(t, "sleep", nil)
	d := startChild(t, "sleep", nil)
	dead := d.pid
	d.stop()
	for _, op := range []struct {
		name string
		err  error
	}{
		{"create", k.Create(dead, Process)},
		{"share to", k.Share(live.pid, dead, Process)},
		{"share from", k.Share(dead, live.pid, Process)},
		{"clear", k.Clear(dead, Process)},
		{"get", func() error { _, err := k.Get(dead); return err }()},
	} {
		if !errors.Is(op.err, ErrNoTask) {
			t.Errorf("%s on dead pid %d: got %v, want ErrNoTask", op.name, dead, op.err)
		}
	}
	t.Logf("dead pid: %v", k.Create(dead, Process))

	// An unprivileged helper may not read the cookie of PID 1 (root): it exits 0 on EPERM.
	self, err := os.Executable()
	must(t, "find test binary", err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=get-pid1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("Get(1) as uid 65534: want ErrNoPermission, got %q (%v)", out, err)
	}
	t.Logf("Get(1) as uid 65534: %s", strings.TrimSpace(string(out)))
}

// TestQEMUConcurrentShares: many Shares at once, then no thread of this process has a cookie.
func TestQEMUConcurrentShares(t *testing.T) {
	k := Prctl{}
	src, want := cookieSource(t)
	var wg sync.WaitGroup
	dst := make([]*child, 6)
	errs := make([]error, len(dst))
	for i := range dst {
		dst[i] = startChild(t, "sleep", nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.Share(src.pid, dst[i].pid, Process)
		}()
	}
	wg.Wait()
	for i, d := range dst {
		must(t, fmt.Sprintf("share %d", i), errs[i])
		if got := cookieOf(t, d.pid); got != want {
			t.Errorf("destination %d: cookie %#x, want %#x", d.pid, got, want)
		}
	}
	checkOwnThreads(t)
}

// cookieSource starts a child process with a new cookie of its own, in the guest.
func cookieSource(t *testing.T) (*child, Cookie) {
	t.Helper()
	needQEMU(t)
	waitReadable(t)
	src := startChild(t, "sleep", nil)
	must(t, "create source", Prctl{}.Create(src.pid, Process))
	return src, cookieOf(t, src.pid)
}

// checkOwnThreads fails if any thread of the test process holds a cookie.
func checkOwnThreads(t *testing.T) {
	t.Helper()
	tids := tasks(t, "/proc", 0)
	for _, tid := range tids {
		c, err := Prctl{}.Get(tid)
		if errors.Is(err, ErrNoTask) {
			continue // a thread that ended meanwhile
		}
		must(t, fmt.Sprintf("get own thread %d", tid), err)
		if c != 0 {
			t.Fatalf("own thread %d holds cookie %#x", tid, c)
		}
	}
	t.Logf("all %d threads of the test process have cookie 0", len(tids))
}

// TestQEMUShareHere: ShareHere, on a thread of OnOwnThread's, gives the destination the
// source's cookie and leaves that thread, and every other of the process, at cookie 0.
func TestQEMUShareHere(t *testing.T) {
	k := Prctl{}
	src, want := cookieSource(t)
	dst := startChild(t, "sleep", nil)
	type result struct {
		tid int
		own Cookie
		err error
	}
	done := make(chan result, 1)
	OnOwnThread(func() {
		r := result{tid: unix.Gettid()}
		if r.err = k.ShareHere(src.pid, dst.pid, Process); r.err == nil {
			r.own, r.err = k.Get(r.tid)
		}
		done <- r
	})
	r := <-done
	if r.tid == os.Getpid() {
		t.Fatal("OnOwnThread ran its function on the main thread")
	}
	must(t, "share here", r.err)
	if got := cookieOf(t, dst.pid); got != want {
		t.Errorf("destination %d: cookie %#x, want %#x", dst.pid, got, want)
	}
	if r.own != 0 {
		t.Errorf("the sharing thread %d kept cookie %#x", r.tid, r.own)
	}
	checkOwnThreads(t)
}
