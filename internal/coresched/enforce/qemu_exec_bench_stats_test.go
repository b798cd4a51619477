package enforce

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

// phaseKernel notes when the manager called Get on each pid and when its Shares to it
// started and returned, to split a watcher repair into phases. A pid's times are kept in
// order: the guest reuses pids over a long run, and phases picks those after the event.
type phaseKernel struct {
	Kernel
	calls *counting

	mu                   sync.Mutex
	get, shared, started map[int][]int64
}

func newPhaseKernel() *phaseKernel {
	c := &counting{Kernel: kernel.Prctl{}}
	k := &phaseKernel{Kernel: c, calls: c}
	k.reset()
	return k
}

func (k *phaseKernel) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.get, k.started, k.shared = map[int][]int64{}, map[int][]int64{}, map[int][]int64{}
}

func (k *phaseKernel) note(m map[int][]int64, pid int) {
	now := procevents.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	m[pid] = append(m[pid], now)
}

func (k *phaseKernel) Get(pid int) (kernel.Cookie, error) {
	k.note(k.get, pid)
	return k.Kernel.Get(pid)
}

func (k *phaseKernel) Share(from, pid int, s kernel.Scope) error {
	k.note(k.started, pid)
	err := k.Kernel.Share(from, pid, s)
	k.note(k.shared, pid)
	return err
}

// ShareHere is noted as Share; the watcher calls it on its own thread.
func (k *phaseKernel) ShareHere(from, pid int, s kernel.Scope) error {
	k.note(k.started, pid)
	err := k.calls.ShareHere(from, pid, s)
	k.note(k.shared, pid)
	return err
}

// phases of one watcher repair of pid, whose exec event the kernel stamped at ev:
// the event until the watcher's Get of the pid (netlink delivery, reading its cgroup, the
// book's lookup), until its Share (GET of the pid and of a source task), and the Share
// (SHARE_FROM, SHARE_TO and putting the sharing thread's cookie back).
type phases struct {
	ok                    bool
	ev                    int64
	deliver, check, share time.Duration
}

func (k *phaseKernel) phases(pid int, ev int64) phases {
	k.mu.Lock()
	defer k.mu.Unlock()
	g := firstFrom(k.get[pid], ev)
	s := firstFrom(k.started[pid], g)
	d := firstFrom(k.shared[pid], s)
	if ev == 0 || g == 0 || s == 0 || d == 0 {
		return phases{}
	}
	return phases{ok: true, ev: ev, deliver: time.Duration(g - ev), check: time.Duration(s - g), share: time.Duration(d - s)}
}

// firstFrom returns the first of times at or after t (0 when t is 0 or there is none).
func firstFrom(times []int64, t int64) int64 {
	if t == 0 {
		return 0
	}
	for _, x := range times {
		if x >= t {
			return x
		}
	}
	return 0
}

// execStats are one sub-benchmark's samples.
type execStats struct {
	others   int
	cookie   []time.Duration // exec event → cookie seen, watcher running
	lag      []time.Duration // exec seen → cookie seen
	base     []time.Duration // exec event → exec seen, watcher stopped
	deliver  []time.Duration
	check    []time.Duration
	share    []time.Duration
	seen     []time.Duration // Share started → cookie seen
	netlink  []time.Duration // exec event → read by the benchmark's own listener
	timeouts int
	unphased int // samples without a watcher exec repair to split (see once)
	prctls   int // prctl calls by the manager during the watcher batches
}

func (st *execStats) add(s execSample, p phases, netlink time.Duration) {
	st.netlink = append(st.netlink, netlink)
	st.cookie = append(st.cookie, time.Duration(s.cookie-s.ev))
	st.lag = append(st.lag, time.Duration(s.cookie-s.execd))
	if s.timeout {
		st.timeouts++
	}
	if !p.ok {
		st.unphased++
		return
	}
	st.deliver = append(st.deliver, p.deliver)
	st.check = append(st.check, p.check)
	st.share = append(st.share, p.share)
	st.seen = append(st.seen, time.Duration(s.cookie-p.ev)-p.deliver-p.check)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pct is the p-th percentile in milliseconds, 0 without samples.
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	return ms(percentile(ds, p))
}

func (st execStats) perExec() float64 { return float64(st.prctls) / float64(max(1, len(st.cookie))) }

func (st execStats) report(b *testing.B) {
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(pct(st.cookie, 0.5), "p50-ms")
	b.ReportMetric(pct(st.cookie, 0.99), "p99-ms")
	b.ReportMetric(pct(st.cookie, 1), "max-ms")
	b.ReportMetric(pct(st.base, 0.5), "base-p50-ms")
	b.ReportMetric(pct(st.base, 0.99), "base-p99-ms")
	b.ReportMetric(pct(st.base, 1), "base-max-ms")
	b.ReportMetric(pct(st.cookie, 0.5)/pct(st.base, 0.5), "p50-x")
	b.ReportMetric(pct(st.cookie, 0.99)/pct(st.base, 0.99), "p99-x")
	b.ReportMetric(float64(st.timeouts), "timeouts")
	b.ReportMetric(st.perExec(), "prctl/exec")
	if st.timeouts > 0 {
		b.Errorf("%d of %d execs into a container cgroup had no cookie %s after the exec", st.timeouts, len(st.cookie), execWait)
	}
}

// printExecTable prints the sub-benchmarks side by side, the ratio of the last to the first
// (more groups) and where the time goes, each line marked for run-go-test.sh.
func printExecTable(rows []execStats) {
	if len(rows) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Printf("exec->cookie "+format+"\n", a...) }
	p("(ms from the kernel's exec event; baseline: the same fork+exec with the watcher stopped, until the exec is seen)")
	p("%6s %5s | %7s %7s %7s | %8s %8s %8s | %5s %5s | %8s %8s | %10s %8s",
		"others", "n", "p50", "p99", "max", "base p50", "base p99", "base max", "p50x", "p99x", "lag p50", "lag p99",
		"prctl/exec", "timeouts")
	for _, r := range rows {
		p("%6d %5d | %7.2f %7.2f %7.2f | %8.2f %8.2f %8.2f | %5.2f %5.2f | %8.2f %8.2f | %10.1f %8d",
			r.others, len(r.cookie), pct(r.cookie, .5), pct(r.cookie, .99), pct(r.cookie, 1),
			pct(r.base, .5), pct(r.base, .99), pct(r.base, 1),
			pct(r.cookie, .5)/pct(r.base, .5), pct(r.cookie, .99)/pct(r.base, .99),
			pct(r.lag, .5), pct(r.lag, .99), r.perExec(), r.timeouts)
	}
	for _, r := range rows {
		p("others=%d where the time goes, p50/p99 ms over %d repairs (%d unsplit): "+
			"exec event to the watcher's GET (netlink, /proc/<pid>/cgroup, lookup) %.2f/%.2f, GETs %.2f/%.2f, "+
			"Share %.2f/%.2f (its start to the cookie seen %.2f/%.2f); the exec event reached a second listener in %.2f/%.2f",
			r.others, len(r.deliver), r.unphased, pct(r.deliver, .5), pct(r.deliver, .99),
			pct(r.check, .5), pct(r.check, .99), pct(r.share, .5), pct(r.share, .99), pct(r.seen, .5), pct(r.seen, .99),
			pct(r.netlink, .5), pct(r.netlink, .99))
	}
	if len(rows) > 1 {
		a, z := rows[0], rows[len(rows)-1]
		p("others=%d / others=%d: p50 %.2fx, p99 %.2fx, prctl per exec %.2fx (baseline p50 %.2fx)",
			z.others, a.others, pct(z.cookie, .5)/pct(a.cookie, .5), pct(z.cookie, .99)/pct(a.cookie, .99),
			z.perExec()/a.perExec(), pct(z.base, .5)/pct(a.base, .5))
	}
}

func waitReadableTB(tb testing.TB) {
	tb.Helper()
	testwait.EventuallyNil(tb, "readable cookies", func() error {
		if s := (kernel.Prctl{}).Probe(); s.Err != nil || !s.Readable {
			return fmt.Errorf("probe: %v", s)
		}
		return nil
	})
}

func mustB(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
