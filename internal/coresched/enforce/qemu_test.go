package enforce

// Real-kernel tests: they need SMT, CONFIG_SCHED_CORE and cgroup v2, so
// they run only in the QEMU guest of hack/qemu/run-go-test.sh (PODFENCE_IN_QEMU=1). Real
// processes (this test binary as helpers) in real cgroups, driven through the manager's NRI
// hooks with api values; no runtime. Each proved fact is logged as a "FACT" line.
//
// The watcher's facts also need CONFIG_CONNECTOR=y and CONFIG_PROC_EVENTS=y, which the
// kernel config fragment hack/qemu/podfence-kernel.config sets; on a kernel without them
// (another PODFENCE_KERNEL_FRAGMENT) that subtest skips and says so. Run:
//
//	bash hack/qemu/run-go-test.sh ./internal/coresched/enforce

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/testwait"
)

const guestCgroups = "/sys/fs/cgroup"

func needQEMU(t *testing.T) {
	t.Helper()
	if os.Getenv("PODFENCE_IN_QEMU") != "1" {
		// Not a host's capabilities alone: these tests make cgroups under the host's
		// /sys/fs/cgroup/kubepods (a kubelet's tree on a node) and move processes into them.
		t.Skip("needs SMT, CONFIG_SCHED_CORE, cgroup v2 and a disposable machine whose /sys/fs/cgroup/kubepods it may change: " +
			"runs in the QEMU guest of hack/qemu/run-go-test.sh ./coresched (PODFENCE_IN_QEMU=1)")
	}
}

// counting is a Kernel that counts calls, and the prctl(2) calls behind them.
type counting struct {
	Kernel
	mu     sync.Mutex
	calls  map[string]int
	prctls int
	shares []time.Duration // how long each Share took, throw-away thread included
}

func (c *counting) add(op string, prctls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	c.prctls += prctls
}

func (c *counting) Create(pid int, s kernel.Scope) error {
	c.add("create", 1)
	return c.Kernel.Create(pid, s)
}
func (c *counting) Share(from, pid int, s kernel.Scope) error {
	c.add("share", 2) // SHARE_FROM and SHARE_TO on a throw-away thread
	start := time.Now()
	err := c.Kernel.Share(from, pid, s)
	c.mu.Lock()
	c.shares = append(c.shares, time.Since(start))
	c.mu.Unlock()
	return err
}
func (c *counting) Get(pid int) (kernel.Cookie, error) { c.add("get", 1); return c.Kernel.Get(pid) }

// ShareHere counts as Share; it runs on the calling thread when the kernel can.
func (c *counting) ShareHere(from, pid int, s kernel.Scope) error {
	h, ok := c.Kernel.(hereSharer)
	if !ok {
		return c.Share(from, pid, s)
	}
	c.add("share", 2)
	start := time.Now()
	err := h.ShareHere(from, pid, s)
	c.mu.Lock()
	c.shares = append(c.shares, time.Since(start))
	c.mu.Unlock()
	return err
}

// take returns and resets the counts.
func (c *counting) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, n := c.calls, c.prctls
	c.calls, c.prctls = nil, 0
	return calls, n
}

func waitReadable(t *testing.T) {
	t.Helper()
	testwait.EventuallyNil(t, "readable cookies", func() error {
		if s := (kernel.Prctl{}).Probe(); s.Err != nil || !s.Readable {
			return fmt.Errorf("probe: %v", s)
		}
		return nil
	})
}

// cookieOf reads every thread of process pid and fails unless they all carry one cookie.
func cookieOf(t *testing.T, pid int) kernel.Cookie {
	t.Helper()
	c, err := processCookie(pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func processCookie(pid int) (kernel.Cookie, error) {
	tids, err := procFS{root: "/proc"}.threads(pid)
	if err != nil {
		return 0, err
	}
	var first kernel.Cookie
	for i, tid := range tids {
		c, err := kernel.Prctl{}.Get(tid)
		if err != nil {
			return 0, err
		}
		if i == 0 {
			first = c
		} else if c != first {
			return 0, fmt.Errorf("pid %d: thread %d has %#x, thread %d has %#x", pid, tids[0], first, tid, c)
		}
	}
	return first, nil
}

// cgroup makes the cgroup of a pod sandbox or container in the guest's cgroup v2 tree.
func cgroup(t *testing.T, path string) {
	t.Helper()
	dir := filepath.Join(guestCgroups, path)
	must(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() { _ = os.Remove(dir) })
}

func moveTo(t *testing.T, path string, pid int) {
	t.Helper()
	err := os.WriteFile(filepath.Join(guestCgroups, path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	must(t, err)
}

// inCgroup starts a helper in a new cgroup path, for a pod sandbox or container.
func inCgroup(t *testing.T, path, mode string) *child {
	t.Helper()
	cgroup(t, path)
	c := startChild(t, mode)
	moveTo(t, path, c.pid)
	return c
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func cookieHex(c kernel.Cookie) string { return fmt.Sprintf("%#x", uint64(c)) }

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// checkOwnThreads fails if any thread of the test process (the agent here) has a cookie.
func checkOwnThreads(t *testing.T) int {
	t.Helper()
	tids, err := procFS{root: "/proc"}.threads(os.Getpid())
	must(t, err)
	for _, tid := range tids {
		c, err := kernel.Prctl{}.Get(tid)
		if errors.Is(err, kernel.ErrNoTask) {
			continue
		}
		must(t, err)
		if c != 0 {
			t.Fatalf("agent thread %d holds cookie %#x", tid, c)
		}
	}
	return len(tids)
}

// startMember runs a hook and logs the kernel calls it took.
func startMember(t *testing.T, k *counting, what string, hook func() error) {
	t.Helper()
	k.take()
	must(t, hook())
	calls, n := k.take()
	t.Logf("FACT prctl calls for %s: %d (%v)", what, n, calls)
}
