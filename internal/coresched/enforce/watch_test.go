package enforce

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

// execsEnv makes the test binary a helper that, N times, reads a line from stdin and execs
// itself (with N-1), then waits for stdin to close.
const execsEnv = "PODFENCE_ENFORCE_TEST_EXECS"

func init() {
	v := os.Getenv(execsEnv)
	if v == "" {
		return
	}
	in := bufio.NewReader(os.Stdin)
	if v == "0" {
		_, _ = in.WriteTo(io.Discard)
		os.Exit(0)
	}
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(0)
	}
	n, _ := strconv.Atoi(v)
	self, _ := os.Executable()
	env := append(os.Environ(), fmt.Sprintf("%s=%d", execsEnv, n-1))
	fmt.Fprintln(os.Stderr, syscall.Exec(self, []string{self, "-test.run=^$"}, env))
	os.Exit(1)
}

// hereNode is a fakeNode whose kernel also shares on the calling thread, as kernel.Prctl
// does: it notes the thread of each call, and the first taint calls report that the thread
// kept another cookie.
type hereNode struct {
	*fakeNode
	mu    sync.Mutex
	tids  []int
	taint int
}

func (h *hereNode) ShareHere(from, pid int, s kernel.Scope) error {
	h.mu.Lock()
	h.tids = append(h.tids, unix.Gettid())
	taint := h.taint > 0
	h.taint--
	h.mu.Unlock()
	if taint {
		return fmt.Errorf("fake share here: %w", kernel.ErrThreadTainted)
	}
	return h.fakeNode.Share(from, pid, s)
}

func (h *hereNode) threads() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.tids)
}

// TestWatcherSharesOnItsThread: the watcher gives a process that execs in a member's cgroup
// its cookie from its own thread (ShareHere). When that thread keeps another cookie, the
// watcher ends it and goes on on a new thread: the next exec is repaired from there, and the
// watcher never stops watching. Real process events (a shell that execs twice), fake cookies.
func TestWatcherSharesOnItsThread(t *testing.T) {
	probe, err := procevents.Open(2 * time.Second)
	if err != nil {
		t.Skipf("no process events here: %v", err)
	}
	must(t, probe.Close())
	n := newFakeNode(t)
	h := &hereNode{fakeNode: n, taint: 1}
	m, err := New(Config{ProcRoot: n.proc, CgroupRoot: n.cg, ReconcileEvery: time.Hour}, h, prometheus.NewRegistry(),
		slog.New(slog.NewTextHandler(t.Output(), nil)))
	must(t, err)
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	want := n.cookieOf(110)

	// A real process that execs at each line on its stdin, in the member's cgroup of the
	// fake tree.
	self, err := os.Executable()
	must(t, err)
	sh := exec.Command(self, "-test.run=^$")
	sh.Env = append(os.Environ(), execsEnv+"=2")
	in, err := sh.StdinPipe()
	must(t, err)
	must(t, sh.Start())
	t.Cleanup(func() { _ = sh.Process.Kill(); _ = sh.Wait() })
	pid := sh.Process.Pid
	n.spawn(cgroupOf(ctr), pid)

	c, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(c) }()
	defer func() { cancel(); <-done }()
	testwait.Eventually(t, "the watcher to subscribe", func() bool { return m.Status().Watching })

	_, _ = io.WriteString(in, "1\n") // exec: the share taints the watcher's thread
	testwait.Eventually(t, "the first share", func() bool { return len(h.threads()) == 1 })
	if got := n.cookieOf(pid); got != 0 {
		t.Fatalf("cookie %#x after the tainted share, want none", got)
	}
	_, _ = io.WriteString(in, "2\n") // exec again: repaired from a new thread
	testwait.Eventually(t, "the process's cookie", func() bool { return n.cookieOf(pid) == want })
	tids := h.threads()
	if len(tids) != 2 || tids[0] == tids[1] {
		t.Errorf("ShareHere threads %v: want two calls, the second on a new thread", tids)
	}
	if !m.Status().Watching {
		t.Error("the watcher stopped watching")
	}
}
