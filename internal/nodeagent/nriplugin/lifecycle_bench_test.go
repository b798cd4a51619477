package nriplugin_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// lifeEvents are the timed events of one pod lifecycle, in order (StopPodSandbox, which
// neither plugin subscribes to, runs untimed before RemovePodSandbox).
var lifeEvents = [...]string{"RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer",
	"RemoveContainer", "RemovePodSandbox"}

const (
	lifeBatch = 10 // lifecycles per plugin per round
	evCreate  = 1  // CreateContainer's index in lifeEvents
	evStart   = 2  // StartContainer's
)

// lifeSide is one plugin's runtime and what its lifecycles measured.
type lifeSide struct {
	name  string
	rt    *runtime
	flush func() error // waits for the agent's checkpoint writer; nil for the nop plugin
	lat   [len(lifeEvents)][]time.Duration
	cpu   time.Duration // process CPU time during this side's batches
	n     int           // lifecycles measured
	seq   int
}

// batch runs n lifecycles and adds the process CPU time they took, the agent's checkpoint
// writes included (flush), to s.cpu.
func (s *lifeSide) batch(tb testing.TB, n int, ann map[string]string) {
	c0 := procCPU()
	for range n {
		s.lifecycle(tb, ann)
	}
	if s.flush != nil {
		if err := s.flush(); err != nil {
			tb.Fatal(err)
		}
	}
	s.cpu += procCPU() - c0
	s.n += n
}

// lifecycle relays one pod with one container through the runtime side, from RunPodSandbox
// to RemovePodSandbox, timing each event.
func (s *lifeSide) lifecycle(tb testing.TB, ann map[string]string) {
	s.seq++
	id := fmt.Sprintf("life%07d", s.seq)
	pod := &api.PodSandbox{Id: "pod-" + id, Uid: "uid-" + id, Name: id, Namespace: "bench", Annotations: ann}
	ctr := &api.Container{Id: "ctr-" + id, PodSandboxId: pod.Id, Name: "app", State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}}
	r, ctx := s.rt.nri, context.Background()
	steps := [...]func() error{
		func() error { return r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}) },
		func() error {
			_, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
			ctr.State = api.ContainerState_CONTAINER_RUNNING
			return err
		},
		func() error { return r.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}) },
		func() error {
			_, err := r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
			ctr.State = api.ContainerState_CONTAINER_STOPPED
			return err
		},
		func() error { return r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}) },
		func() error { return r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}) },
	}
	for e, step := range steps {
		if e == len(steps)-1 {
			blk := r.BlockPluginSync()
			err := r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod})
			blk.Unblock()
			if err != nil {
				tb.Fatalf("StopPodSandbox %s on %s: %v", id, s.name, err)
			}
		}
		blk := r.BlockPluginSync()
		start := time.Now()
		err := step()
		s.lat[e] = append(s.lat[e], time.Since(start))
		blk.Unblock()
		if err != nil {
			tb.Fatalf("%s %s on %s: %v", lifeEvents[e], id, s.name, err)
		}
		if e == evStart && s.flush != nil {
			// A real container outlives the checkpoint's batch gap: its record is written
			// before its removal, which is another write (they never cancel).
			if err := s.flush(); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

func (s *lifeSide) reset() { s.lat, s.cpu, s.n = [len(lifeEvents)][]time.Duration{}, 0, 0 }

// procCPU is the CPU time (user and system) this process has used.
func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLifecycle relays whole pod lifecycles through the real NRI runtime side to the
// podfence agent and to a do-nothing plugin, with K = 0, 1,000 and 5,000 live containers
// already present (created and started through the same runtime side). Each b.N is one
// round: a batch of lifeBatch lifecycles on each plugin, the order alternating, so load on
// the machine hits both alike (-benchtime 200x: 2,000 lifecycles per plugin per K).
// mix=default: every container, the measured one too, is in the default pool; mix=pooled:
// 200 of the K are exclusive and 300 shared, and the measured container takes one exclusive
// CPU; mix=default-coresched: mix=default with the core-scheduling extension that `podfence
// agent` always installs (turned off here, as on a node without core scheduling).
func BenchmarkLifecycle(b *testing.B) {
	for _, v := range []struct {
		mix               string
		pooled, coresched bool
	}{{"default", false, false}, {"pooled", true, false}, {"default-coresched", false, true}} {
		b.Run("mix="+v.mix, func(b *testing.B) {
			var ann map[string]string
			if v.pooled {
				ann = poolReq(`{"app": {"exclusive_a": 1}}`)
			}
			var opts nriplugin.Options
			if v.coresched {
				opts.Extensions = []nriplugin.Extension{coreschedOff(b)}
			}
			pf := newRuntime(b)
			ar := startAgent(b, pf, newNode(b, benchTopology, benchPools), openStore(b, b.TempDir()), opts)
			base := newRuntime(b)
			s, err := startNop(b.Context(), base.sock)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Stop)
			base.waitPlugins(1)
			sides := [2]*lifeSide{{name: "podfence", rt: pf, flush: ar.Flush}, {name: "nop", rt: base}}
			have := 0
			for _, k := range []int{0, 1000, 5000} {
				grow(b, pf, have, k, v.pooled)
				grow(b, base, have, k, v.pooled)
				have = k
				if err := ar.Flush(); err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprint("K=", k), func(b *testing.B) {
					for _, sd := range sides { // warm up
						sd.batch(b, lifeBatch, ann)
						sd.reset()
					}
					for r := 0; b.Loop(); r++ {
						sides[r%2].batch(b, lifeBatch, ann)
						sides[1-r%2].batch(b, lifeBatch, ann)
					}
					lifeReport(b, fmt.Sprintf("mix=%s K=%d", v.mix, k), sides[0], sides[1])
				})
			}
		})
	}
}

// lifeReport logs the per-event table and CPU per lifecycle against the targets (each
// event's p50 within 0.1 ms and CreateContainer's p99 within 0.5 ms of the nop plugin's; CPU
// per lifecycle within 1.5x), and reports the main figures as metrics.
func lifeReport(b *testing.B, title string, pf, nop *lifeSide) {
	var w strings.Builder
	fmt.Fprintf(&w, "%s: %d lifecycles per plugin, batches of %d alternating (µs)\n", title, pf.n, lifeBatch)
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "event\tpf p50\tnop p50\tΔp50\tratio\tpf p99\tnop p99\tΔp99\tratio\t target\t\n")
	worst := 0.0
	for e, name := range lifeEvents {
		a50, a99 := percentile(pf.lat[e], 0.50), percentile(pf.lat[e], 0.99)
		n50, n99 := percentile(nop.lat[e], 0.50), percentile(nop.lat[e], 0.99)
		worst = max(worst, a50-n50)
		target := "Δp50≤100: " + met(a50-n50 <= 100)
		if e == evCreate {
			target += ", Δp99≤500: " + met(a99-n99 <= 500)
			b.ReportMetric(a99-n99, "create-p99-diff-µs")
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%+.0f\t%.2f\t%.0f\t%.0f\t%+.0f\t%.2f\t %s\t\n",
			name, a50, n50, a50-n50, a50/n50, a99, n99, a99-n99, a99/n99, target)
	}
	_ = tw.Flush()
	pc := float64(pf.cpu.Microseconds()) / float64(pf.n)
	nc := float64(nop.cpu.Microseconds()) / float64(nop.n)
	fmt.Fprintf(&w, "CPU per lifecycle (whole process, runtime side included): podfence %.0f µs, nop %.0f µs, "+
		"ratio %.2f (target ≤1.5: %s)\n", pc, nc, pc/nc, met(pc/nc <= 1.5))
	b.Log("\n" + strings.TrimSuffix(w.String(), "\n")) // benchmark logs keep 10 lines
	b.ReportMetric(worst, "max-p50-diff-µs")
	b.ReportMetric(pc, "cpu-µs/life")
	b.ReportMetric(nc, "nop-cpu-µs/life")
	b.ReportMetric(pc/nc, "cpu-ratio")
}
