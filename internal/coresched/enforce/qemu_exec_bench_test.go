package enforce

// BenchmarkQEMUExecToCookie: on the real kernel of the QEMU guest (hack/qemu/run-go-test.sh
// with PODFENCE_QEMU_BENCH; make qemu runs it), how long after its exec a process that
// entered a container's cgroup, as runc exec does, runs before PR_SCHED_CORE_GET shows its
// group's cookie. Only the watcher can give it: the process enters after StartContainer and
// the reconcile runs hourly. Each sample: fork+exec this test binary ("enter" helper), which
// writes itself into the cgroup and execs a symlink to the same binary ("parked"). The
// benchmark polls /proc/<pid>/comm and GET on the pid every 100 µs from the fork on (a busy
// poll would take host CPU from the guest's other vCPUs under TCG). The exec's time is the
// kernel's: the timestamp of its exec event, which a process-event listener of the
// benchmark's own reads (CLOCK_MONOTONIC, as the polls). Figures run from it to the first
// poll that shows the cookie; the baseline, in the same run and polled the same way, is the
// same fork+exec with the watcher stopped, until a poll shows the exec (comm "parked", which
// the kernel sets a little before it sends the event). Batches of the two alternate, so
// load on the host hits both alike. A sample whose cookie is not seen within 1 s of its exec
// is a timeout and fails the benchmark.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
	"github.com/podfence/podfence/internal/testwait"
)

const (
	benchModeEnv   = "PODFENCE_CORESCHED_BENCH_MODE"   // "enter" or "park"
	benchProcsEnv  = "PODFENCE_CORESCHED_BENCH_PROCS"  // enter: the cgroup.procs file to write
	benchParkedEnv = "PODFENCE_CORESCHED_BENCH_PARKED" // enter: the program to exec
	parkedName     = "parked"                          // its name, and so its comm
	execBatch      = 25                                // samples per batch of one kind
	execWait       = time.Second                       // bound on each wait for a cookie
	execPoll       = 100 * time.Microsecond            // pause between two polls
)

// The helpers run from init, before TestMain: "enter" moves itself into a cgroup and execs
// "parked"; "parked" waits for stdin to close.
func init() {
	switch os.Getenv(benchModeEnv) {
	case "enter":
		os.Exit(benchEnter())
	case "park":
		_, _ = bufio.NewReader(os.Stdin).WriteTo(discard{})
		os.Exit(0)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func benchEnter() int {
	if err := os.WriteFile(os.Getenv(benchProcsEnv), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		fmt.Fprintln(os.Stderr, "enter:", err)
		return 2
	}
	parked := os.Getenv(benchParkedEnv)
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, benchModeEnv+"=") })
	env = append(env, benchModeEnv+"=park")
	err := syscall.Exec(parked, []string{parked}, env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 2
}

// execBench is one manager with its watcher, a target container and other pods.
type execBench struct {
	m      *Manager
	k      *phaseKernel
	parked string
	procs  string        // the target container's cgroup.procs
	want   kernel.Cookie // its group's cookie
	stop   func()        // stops the running watcher; nil when stopped
	others int

	mu      sync.Mutex
	repairs map[int][]int64    // pid → the kernel's exec event times, from the watcher's repairs
	heard   map[int][][2]int64 // pid → its exec events' times and when a second listener read them
}

// execSample is one fork+exec: CLOCK_MONOTONIC nanoseconds of its exec event and of the
// first polls that showed the exec and the cookie.
type execSample struct {
	pid               int
	since             int64 // before its fork: events of the pid before are another process's
	ev, execd, cookie int64
	timeout           bool
}

func BenchmarkQEMUExecToCookie(b *testing.B) {
	if os.Getenv("PODFENCE_IN_QEMU") != "1" {
		b.Skip("needs SMT, CONFIG_SCHED_CORE and process events: runs in the QEMU guest " +
			"(PODFENCE_QEMU_BENCH=ExecToCookie hack/qemu/run-go-test.sh ./internal/coresched/enforce)")
	}
	e := newExecBench(b)
	var rows []execStats
	for _, others := range []int{1, 200} {
		e.addOthers(b, others)
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			st := e.measure(b, b.N)
			st.report(b)
			if b.N > 1 {
				rows = append(rows, st)
			}
		})
	}
	printExecTable(rows)
}

func newExecBench(b *testing.B) *execBench {
	waitReadableTB(b)
	self, err := os.Executable()
	mustB(b, err)
	e := &execBench{parked: filepath.Join(b.TempDir(), parkedName), repairs: map[int][]int64{}, heard: map[int][][2]int64{}}
	e.listen(b)
	mustB(b, os.Symlink(self, e.parked))
	e.k = newPhaseKernel()
	cfg := Config{ReconcileEvery: time.Hour, OnRepair: e.onRepair}
	e.m, err = New(cfg, e.k, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	mustB(b, err)
	pod := fakePod("t", "target")
	ctr := fakeCtr(pod, "app", 0)
	benchCgroup(b, "/kubepods/podt")
	pod.Pid = uint32(e.park(b, pod.Linux.CgroupsPath))
	ctr.Pid = uint32(e.park(b, cgroupOf(ctr)))
	mustB(b, e.m.RunPodSandbox(context.Background(), pod))
	mustB(b, e.m.StartContainer(context.Background(), pod, ctr))
	e.want, err = kernel.Prctl{}.Get(int(ctr.Pid))
	mustB(b, err)
	if e.want == 0 {
		b.Fatalf("target container pid %d has no cookie", ctr.Pid)
	}
	e.procs = filepath.Join(guestCgroups, cgroupOf(ctr), "cgroup.procs")
	b.Cleanup(e.stopWatcher)
	return e
}

// addOthers runs other pods, each its own group with a live process in its own cgroup,
// until there are n.
func (e *execBench) addOthers(b *testing.B, n int) {
	for ; e.others < n; e.others++ {
		id := fmt.Sprintf("o%d", e.others)
		pod := fakePod(id, "ns-"+id)
		benchCgroup(b, "/kubepods/pod"+id)
		pod.Pid = uint32(e.park(b, pod.Linux.CgroupsPath))
		mustB(b, e.m.RunPodSandbox(context.Background(), pod))
	}
	if s := e.m.Status(); s.Groups != n+1 {
		b.Fatalf("status %+v: want %d groups", s, n+1)
	}
}

// park starts a parked process in a new cgroup path and returns its pid once it has exec'd.
func (e *execBench) park(b *testing.B, path string) int {
	benchCgroup(b, path)
	cmd := exec.Command(e.parked)
	cmd.Env = append(os.Environ(), benchModeEnv+"=park", "GOMAXPROCS=1")
	in, err := cmd.StdinPipe()
	mustB(b, err)
	mustB(b, cmd.Start())
	b.Cleanup(func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	mustB(b, os.WriteFile(filepath.Join(guestCgroups, path, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0))
	return cmd.Process.Pid
}

func benchCgroup(b *testing.B, path string) {
	dir := filepath.Join(guestCgroups, path)
	if _, err := os.Stat(dir); err == nil {
		return
	}
	mustB(b, os.MkdirAll(dir, 0o755))
	b.Cleanup(func() { _ = os.Remove(dir) })
}

// listen reads the process events on a socket of its own, to time their delivery apart
// from the watcher's work.
func (e *execBench) listen(b *testing.B) {
	c, err := procevents.Open(2 * time.Second)
	mustB(b, err)
	done := make(chan struct{})
	b.Cleanup(func() { _ = c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			evs, err := c.Read(buf)
			if err != nil && !errors.Is(err, procevents.ErrLost) {
				return
			}
			now := procevents.Now()
			e.mu.Lock()
			for _, ev := range evs {
				if ev.What == procevents.Exec {
					e.heard[ev.Pid] = append(e.heard[ev.Pid], [2]int64{int64(ev.Time), now})
				}
			}
			e.mu.Unlock()
		}
	}()
}

func (e *execBench) onRepair(r Repair) {
	if r.By != "watcher" || r.Event != "exec" {
		return
	}
	e.mu.Lock()
	e.repairs[r.Pid] = append(e.repairs[r.Pid], procevents.Now()-int64(r.Delay))
	e.mu.Unlock()
}

func (e *execBench) startWatcher(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.m.Run(ctx); close(done) }()
	e.stop = func() { cancel(); <-done }
	testwait.Eventually(b, "watcher subscribed", func() bool { return e.m.Status().Watching })
}

func (e *execBench) stopWatcher() {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// measure takes n samples of each kind in alternating batches.
func (e *execBench) measure(b *testing.B, n int) execStats {
	st := execStats{others: e.others}
	e.k.reset()
	e.k.calls.take()
	for done := 0; done < n; done += execBatch {
		m := min(execBatch, n-done)
		e.stopWatcher()
		for range m {
			s := e.once(b, false)
			st.base = append(st.base, time.Duration(s.execd-s.ev))
		}
		e.startWatcher(b)
		for range m {
			s := e.once(b, true)
			// The watcher reports a repair after its throw-away thread is gone, which may
			// be after the poll saw the cookie.
			testwait.Until(execWait, func() bool { return e.eventTime(s.pid, s.since) != 0 })
			h := e.heardAt(s.pid, s.since)
			st.add(s, e.k.phases(s.pid, e.eventTime(s.pid, s.since)), time.Duration(h[1]-h[0]))
		}
	}
	e.stopWatcher()
	_, st.prctls = e.k.calls.take()
	return st
}

// heardAt returns the time of the exec event of "parked" in process pid (its second exec
// since since, after the enter helper's) and when the listener read it; zeros before. The
// guest reuses pids over a long run: older events of the pid are left out.
func (e *execBench) heardAt(pid int, since int64) [2]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, h := range e.heard[pid] {
		if h[0] >= since {
			if n++; n == 2 {
				return h
			}
		}
	}
	return [2]int64{}
}

// eventTime returns the exec event time of the watcher's repair of pid since since; 0 before.
func (e *execBench) eventTime(pid int, since int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.repairs[pid] {
		if t >= since {
			return t
		}
	}
	return 0
}

// once runs one sample; withCookie waits for the cookie too.
func (e *execBench) once(b *testing.B, withCookie bool) execSample {
	self, err := os.Executable()
	mustB(b, err)
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), benchModeEnv+"=enter", benchProcsEnv+"="+e.procs,
		benchParkedEnv+"="+e.parked, "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	mustB(b, err)
	since := procevents.Now()
	mustB(b, cmd.Start())
	defer func() { _ = in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	s := execSample{pid: pid, since: since}
	comm := fmt.Sprintf("/proc/%d/comm", pid)
	start := procevents.Now()
	var execd, cookie int64
	for {
		name, _ := os.ReadFile(comm)
		c, _ := kernel.Prctl{}.Get(pid)
		now := procevents.Now()
		if execd == 0 && string(name) == parkedName+"\n" {
			execd = now
		}
		if execd != 0 && cookie == 0 && c == e.want {
			cookie = now
		}
		if execd != 0 && (cookie != 0 || !withCookie) {
			break
		}
		if execd != 0 && now-execd > int64(execWait) {
			s.timeout = true
			cookie = execd + int64(execWait)
			break
		}
		if now-start > int64(10*time.Second) {
			b.Fatalf("helper %d did not exec within 10 s", pid)
		}
		time.Sleep(execPoll)
	}
	if !testwait.Until(execWait, func() bool { return e.heardAt(pid, since)[0] != 0 }) {
		b.Fatalf("the benchmark's listener did not hear the exec of pid %d", pid)
	}
	s.ev, s.execd, s.cookie = e.heardAt(pid, since)[0], execd, cookie
	return s
}
