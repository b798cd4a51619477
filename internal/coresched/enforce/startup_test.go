package enforce

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

// TestReadableWait: cookies read back as 0 for the first seconds after boot. New probes
// again until they read back (by default for up to 10 s), and only then says core
// scheduling is on; a node where they never do within the wait is unsupported, and says
// after how long. A node that reads them at once is probed once. In a synctest bubble, the
// waits between probes take no time: the default wait is met however slow the machine.
func TestReadableWait(t *testing.T) { synctest.Test(t, testReadableWait) }

func testReadableWait(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	if err := m.Status().Err; err != nil || n.probes != 1 {
		t.Errorf("readable node: %v after %d probes, want on after 1", err, n.probes)
	}

	boot := newFakeNode(t)
	boot.unread = 2
	m, _ = boot.manager(Config{}) // the default wait
	if err := m.Status().Err; err != nil || boot.probes != 3 {
		t.Errorf("after boot: %v after %d probes, want on after the third", err, boot.probes)
	}

	never := newFakeNode(t)
	never.unread = 1 << 30
	m, reg := never.manager(Config{ReadableWait: 30 * time.Millisecond})
	err := m.Status().Err
	if want := "probe after 30ms: cookies read back as 0"; !errors.Is(err, errUnreadable) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("never readable: %v, want %q", err, want)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP podfence_coresched_supported 1 when this node can give containers core-scheduling cookies; else 0, with the reason.
# TYPE podfence_coresched_supported gauge
podfence_coresched_supported{reason="cookies_unreadable"} 0
`), "podfence_coresched_supported"); err != nil {
		t.Error(err)
	}
}

// TestRunRetriesGuard: a node whose Group Identity guard failed at start makes no cookie;
// Run retries the guard at each period, and once it passes the node gives cookies again.
func TestRunRetriesGuard(t *testing.T) {
	n := newFakeNode(t)
	const readOnly = "/proc/sys/kernel/osrelease" // not "0", and refuses writes even from root
	if _, err := os.Stat(readOnly); err != nil {
		t.Skipf("need %s: %v", readOnly, err)
	}
	gi := filepath.Join(n.proc, kernel.GroupIdentityFile)
	must(t, os.MkdirAll(filepath.Dir(gi), 0o755))
	must(t, os.Symlink(readOnly, gi)) // Group Identity "on" and unwritable: the guard fails
	m, reg := n.manager(Config{ReconcileEvery: time.Millisecond})
	if err := m.Status().Err; !errors.Is(err, kernel.ErrGroupIdentityOn) {
		t.Fatalf("status at start: %v, want the guard's failure", err)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(c) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	n.write(gi+".new", "1\n")
	must(t, os.Rename(gi+".new", gi)) // still on, now writable: the guard can turn it off
	testwait.Eventually(t, "the guard to pass on a retry", func() bool { return m.Status().Err == nil })
	if b, _ := os.ReadFile(gi); string(b) != "0\n" {
		t.Errorf("group identity %q, want 0", b)
	}
	if got := testutil.ToFloat64(m.met.supported.WithLabelValues("")); got != 1 {
		t.Errorf("supported = %v, want 1", got)
	}
	pod := fakePod("p1", "shop", coresched.LabelGroup, "a")
	ctr := fakeCtr(pod, "app", 110)
	n.spawn(cgroupOf(ctr), 110)
	must(t, m.StartContainer(ctx, pod, ctr))
	if n.cookieOf(110) == 0 {
		t.Error("no cookie after the guard passed")
	}
	if n, err := testutil.GatherAndCount(reg, "podfence_coresched_supported"); err != nil || n != 1 {
		t.Errorf("%d supported series, %v: want the one without a reason", n, err)
	}
}

// TestRunWatches: on a host whose kernel sends this process its process events, Run
// subscribes to them (Status.Watching, podfence_coresched_watcher_up) until its context ends.
func TestRunWatches(t *testing.T) {
	probe, err := procevents.Open(2 * time.Second)
	if err != nil {
		t.Skipf("no process events here: %v", err)
	}
	must(t, probe.Close())
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	c, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(c) }()
	testwait.Eventually(t, "the watcher to subscribe", func() bool { return m.Status().Watching })
	if got := testutil.ToFloat64(m.met.watching); got != 1 {
		t.Errorf("watcher_up = %v while watching", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if m.Status().Watching || testutil.ToFloat64(m.met.watching) != 0 {
		t.Errorf("after Run: watching %v, watcher_up %v", m.Status().Watching, testutil.ToFloat64(m.met.watching))
	}
}
