package nriplugin_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/podfence/podfence/internal/asynclog"
	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// Pressure beside BenchmarkLifecyclePressure: PODFENCE_PRESSURE_CPU processes that spin (default
// 2 per CPU) and PODFENCE_PRESSURE_FSYNC processes that write and fsync in a loop (default 2), in
// the filesystem of the agent's checkpoint and log. PODFENCE_PRESSURE_SYNCS is how many agent
// restarts (runtime Synchronize calls) are timed after the lifecycles (default: one per 50
// lifecycles, 10 to 200).
const (
	hogEnv       = "PODFENCE_PRESSURE_HOG" // set in the hog processes: "cpu" or "fsync:<dir>"
	hogCPUEnv    = "PODFENCE_PRESSURE_CPU"
	hogFsyncEnv  = "PODFENCE_PRESSURE_FSYNC"
	pressSyncEnv = "PODFENCE_PRESSURE_SYNCS"
	pressK       = 1000 // containers running beside the measured ones (pooled: 200 exclusive, 300 shared)
)

// runHogIfAsked turns this test binary into a hog process when hogEnv is set (TestMain calls
// it first); it never returns then. The benchmark kills its hogs when it ends.
func runHogIfAsked() {
	kind := os.Getenv(hogEnv)
	switch {
	case kind == "":
		return
	case kind == "cpu":
		for x := uint64(1); ; x = x*6364136223846793005 + 1 {
		}
	case strings.HasPrefix(kind, "fsync:"):
		fsyncStorm(strings.TrimPrefix(kind, "fsync:"))
	}
	fmt.Fprintf(os.Stderr, "%s=%q: want cpu or fsync:<dir>\n", hogEnv, kind)
	os.Exit(2)
}

// fsyncStorm writes 256 KiB blocks to a 32 MiB file in dir, each followed by fdatasync, for
// ever: what `dd oflag=sync` or a build's linker and package cache do to a journal.
func fsyncStorm(dir string) {
	f, err := os.CreateTemp(dir, "storm-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	block := make([]byte, 256<<10)
	for i := range block {
		block[i] = byte(i)
	}
	for off := int64(0); ; off = (off + int64(len(block))) % (32 << 20) {
		if _, err := f.WriteAt(block, off); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = f.Sync()
	}
}

// startPressure starts the hog processes (this test binary again, see runHogIfAsked) and
// returns a description; they are killed when the benchmark ends.
func startPressure(b *testing.B, dir string) string {
	nCPU, nSync := envInt(b, hogCPUEnv, 2*goruntime.NumCPU()), envInt(b, hogFsyncEnv, 2)
	start := func(kind string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), hogEnv+"="+kind)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for range nCPU {
		start("cpu")
	}
	for range nSync {
		start("fsync:" + dir)
	}
	return fmt.Sprintf("%d CPU hogs and %d write+fsync loops on %d CPUs", nCPU, nSync, goruntime.NumCPU())
}

func envInt(b *testing.B, name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

// pipeLog is the agent's log output as the runtime gives it to a container: a pipe that a
// copier drains into a file in dir (containerd's CRI log copier), so a copier slowed by the
// disk fills the pipe. The logger is built as `podfence agent` builds it (asynclog).
func pipeLog(b *testing.B, dir string) *slog.Logger {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		b.Fatal(err)
	}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(f, r)
		close(copied)
	}()
	out, err := cliflags.Log{Level: "info", Format: "text"}.Logger(w)
	if err != nil {
		b.Fatal(err)
	}
	async := asynclog.New(out.Handler(), asynclog.DefaultRecords)
	b.Cleanup(func() { // registered first: runs after the agent stopped
		_ = async.Close()
		_ = w.Close()
		<-copied
		_ = r.Close()
		_ = f.Close()
	})
	return slog.New(async)
}

// BenchmarkLifecyclePressure relays whole pod lifecycles through the real NRI runtime side
// to the podfence agent and to a do-nothing plugin (nritest/nop) alternately, one lifecycle
// each per b.N, with pressK pooled containers running: without pressure, then beside CPU
// hogs and write+fsync loops on the checkpoint's filesystem (startPressure). The agent runs
// as `podfence agent` does: its checkpoint on disk, its log into a pipe drained to a file.
// After the lifecycles each plugin is restarted PODFENCE_PRESSURE_SYNCS times, timing the
// runtime's Synchronize. Reported per event: p50, p99, p99.9 and max of each plugin (make
// bench-pressure: 10,000 lifecycles; target: no podfence event over 100 ms).
func BenchmarkLifecyclePressure(b *testing.B) {
	for _, pressure := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "cpu+fsync"}[pressure]
		b.Run("pressure="+name, func(b *testing.B) {
			dir := b.TempDir()
			log := pipeLog(b, dir)
			what := "none"
			if pressure {
				what = startPressure(b, dir)
			}
			node := newNode(b, benchTopology, benchPools)
			ckpt := filepath.Join(dir, "checkpoint")
			pf := newRuntime(b)
			ar := startAgentLog(b, pf, node, openStore(b, ckpt), nriplugin.Options{}, log)
			base := newRuntime(b)
			s, err := startNop(b.Context(), base.sock)
			if err != nil {
				b.Fatal(err)
			}
			base.waitPlugins(1)
			grow(b, pf, 0, pressK, true)
			grow(b, base, 0, pressK, true)
			if err := ar.Flush(); err != nil {
				b.Fatal(err)
			}
			ann := poolReq(`{"app": {"exclusive_a": 1}}`)
			sides := [2]*lifeSide{{name: "podfence", rt: pf, flush: ar.Flush}, {name: "nop", rt: base}}
			for _, sd := range sides { // warm up
				sd.batch(b, lifeBatch, ann)
				sd.reset()
			}
			gc0 := readGC()
			for r := 0; b.Loop(); r++ {
				sides[r%2].batch(b, 1, ann)
				sides[1-r%2].batch(b, 1, ann)
			}
			gc := readGC().since(gc0)
			// Restarts: the runtime synchronizes each new connection with every pod and container.
			syncs := envInt(b, pressSyncEnv, min(max(sides[0].n/50, 10), 200))
			var pfSync, nopSync []time.Duration
			restartAgent := func() {
				ar.stop()
				ar = startAgentLog(b, pf, node, openStore(b, ckpt), nriplugin.Options{}, log)
				pfSync = append(pfSync, pf.lastSync())
			}
			restartNop := func() {
				s.Stop()
				if s, err = startNop(b.Context(), base.sock); err != nil {
					b.Fatal(err)
				}
				base.waitPlugins(1 + len(nopSync) + 1)
				nopSync = append(nopSync, base.lastSync())
			}
			for i := range syncs {
				if i%2 == 0 {
					restartAgent()
					restartNop()
				} else {
					restartNop()
					restartAgent()
				}
			}
			b.Cleanup(s.Stop)
			pressureReport(b, fmt.Sprintf("pressure: %s; %d containers running", what, pressK+1), sides[0], sides[1],
				pfSync, nopSync, gc)
		})
	}
}

// pressureReport logs the per-event latency table of both plugins (ms) and reports the
// worst podfence event as a metric.
func pressureReport(b *testing.B, title string, pf, nop *lifeSide, pfSync, nopSync []time.Duration, gc gcStats) {
	worst := 0.0
	for _, ds := range append(pf.lat[:], pfSync) {
		if len(ds) > 0 {
			worst = max(worst, msAt(ds, 1))
		}
	}
	var w strings.Builder // benchmark logs keep 10 lines
	fmt.Fprintf(&w, "%s: %d lifecycles per plugin, alternating (ms); worst podfence event %.1f ms (target ≤100: %s); "+
		"%d GC cycles, longest stop-the-world pause ≤%.2f ms (the whole process)\n", title, pf.n, worst, met(worst <= 100),
		gc.cycles, gc.maxPause*1e3)
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "event\tpf p50\tp99\tp99.9\tmax\tnop p50\tp99\tp99.9\tmax\t\n")
	row := func(name string, a, n []time.Duration) {
		if len(a) == 0 || len(n) == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.1f\t%.3f\t%.3f\t%.3f\t%.1f\t\n", name, msAt(a, 0.5), msAt(a, 0.99),
			msAt(a, 0.999), msAt(a, 1), msAt(n, 0.5), msAt(n, 0.99), msAt(n, 0.999), msAt(n, 1))
	}
	for e, name := range lifeEvents {
		row(name, pf.lat[e], nop.lat[e])
	}
	row(fmt.Sprintf("Synchronize (%d restarts)", len(pfSync)), pfSync, nopSync)
	_ = tw.Flush()
	b.Log("\n" + strings.TrimSuffix(w.String(), "\n"))
	b.ReportMetric(worst, "max-event-ms")
}

// msAt is the p-th quantile of ds in ms (p 1: the maximum).
func msAt(ds []time.Duration, p float64) float64 { return percentile(ds, p) / 1e3 }

// gcStats is this process's GC cycle count and stop-the-world pause histogram.
type gcStats struct {
	cycles   uint64
	pauses   *metrics.Float64Histogram
	maxPause float64 // seconds: the upper bound of the highest bucket with a pause (since)
}

func readGC() gcStats {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(m)
	return gcStats{cycles: m[0].Value.Uint64(), pauses: m[1].Value.Float64Histogram()}
}

// since is what happened between earlier and s.
func (s gcStats) since(earlier gcStats) gcStats {
	out := gcStats{cycles: s.cycles - earlier.cycles}
	for i := len(s.pauses.Counts) - 1; i >= 0; i-- {
		if s.pauses.Counts[i] > earlier.pauses.Counts[i] {
			out.maxPause = s.pauses.Buckets[i+1]
			break
		}
	}
	return out
}
