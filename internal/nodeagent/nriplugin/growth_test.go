package nriplugin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/containerd/nri/pkg/api"

	csenforce "github.com/podfence/podfence/internal/coresched/enforce"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// growthKinds are the measured containers' requests: default pool, a shared share, an
// exclusive CPU.
var growthKinds = [...]struct{ name, req string }{
	{"default", ""}, {"shared", `{"app": {"shared_s": 50}}`}, {"exclusive", `{"app": {"exclusive_a": 1}}`},
}

// callCost is what one handler call cost.
type callCost struct {
	allocs, bytes uint64
	d             time.Duration
}

// TestHandlerWorkFlatInK fails if a handler's allocations grow with the number of live
// containers. It calls the handlers of two agents directly (no socket) for the same pod
// lifecycles, one agent holding no container and one holding 5,000 (50 exclusive, 200
// shared, the rest in the default pool, all started), alternating, with GOMAXPROCS=1. For
// each handler and container kind it compares the medians per call of the heap objects and
// bytes allocated (within 4 objects and 25% + 4 KiB: an O(K) copy at K = 5,000 is 40 KB or
// more). Allocations, unlike time, do not depend on how loaded the machine is: the time per
// call is BenchmarkHandlerWorkFlatInK's. Subtest agent is the agent alone; coresched adds
// the core-scheduling extension.
func TestHandlerWorkFlatInK(t *testing.T) {
	rounds := func(round func(int)) {
		for r := range 300 {
			round(r)
		}
	}
	t.Run("agent", func(t *testing.T) { checkFlatInK(t, agentOnly, rounds, false) })
	t.Run("coresched", func(t *testing.T) { checkFlatInK(t, withCoresched(t), rounds, false) })
}

// BenchmarkHandlerWorkFlatInK is TestHandlerWorkFlatInK's comparison with the time per call
// too, one round (a lifecycle on each agent) per iteration: it fails if a handler's median
// time per call at K = 5,000 is over 3x that at K = 0 plus 2 µs (an O(K) walk without
// allocation costs ~5 µs or more), measured alternately in the same run, and reports the
// largest ratio.
func BenchmarkHandlerWorkFlatInK(b *testing.B) {
	rounds := func(b *testing.B) func(round func(int)) {
		return func(round func(int)) {
			for r := 0; b.Loop(); r++ {
				round(r)
			}
		}
	}
	b.Run("agent", func(b *testing.B) { checkFlatInK(b, agentOnly, rounds(b), true) })
	b.Run("coresched", func(b *testing.B) { checkFlatInK(b, withCoresched(b), rounds(b), true) })
}

func agentOnly() nriplugin.Options { return nriplugin.Options{} }

func withCoresched(tb testing.TB) func() nriplugin.Options {
	return func() nriplugin.Options {
		return nriplugin.Options{Extensions: []nriplugin.Extension{coreschedOff(tb)}}
	}
}

// coreschedOff is the core-scheduling extension as `podfence agent` always installs it,
// turned off (as on a node without core scheduling): it still books every container.
func coreschedOff(tb testing.TB) nriplugin.Extension {
	dir := tb.TempDir()
	m, err := csenforce.New(csenforce.Config{Disabled: true, ProcRoot: dir, CgroupRoot: dir}, kernel.Prctl{}, nil,
		slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// checkFlatInK runs TestHandlerWorkFlatInK's comparison for agents made with opts, over the
// rounds rounds calls for; timed compares the time per call too.
func checkFlatInK(tb testing.TB, opts func() nriplugin.Options, rounds func(round func(r int)), timed bool) {
	const k = 5000
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(1))
	ctx := context.Background()
	var agents [2]*nriplugin.Plugin
	for i := range agents {
		agents[i] = nriplugin.New(newNode(tb, benchTopology, benchPools), nritest.NoCheckpoint{},
			slog.New(slog.NewTextHandler(io.Discard, nil)), opts())
		tb.Cleanup(func() { _ = agents[i].Close() })
		if _, err := agents[i].Synchronize(ctx, nil, nil); err != nil {
			tb.Fatal(err)
		}
	}
	growDirect(tb, agents[1], k)
	var costs [2][len(growthKinds)][len(lifeEvents)][]callCost
	rounds(func(r int) {
		for j := range 2 {
			i := (r + j) % 2
			kind := r % len(growthKinds)
			c := directLifecycle(tb, agents[i], fmt.Sprintf("life%05d", r), growthKinds[kind].req)
			for e := range c {
				costs[i][kind][e] = append(costs[i][kind][e], c[e])
			}
			if err := agents[i].Flush(); err != nil {
				tb.Fatal(err)
			}
		}
	})
	var w strings.Builder
	tw := tabwriter.NewWriter(&w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "handler\tkind\tallocs K=0\tK=%d\tbytes K=0\tK=%d\tµs K=0\tK=%d\tratio\t\n", k, k, k)
	worst := 0.0
	for kind, kc := range growthKinds {
		for e, name := range lifeEvents {
			if len(costs[0][kind][e]) == 0 || len(costs[1][kind][e]) == 0 {
				continue // fewer rounds than kinds
			}
			c0, c1 := medians(costs[0][kind][e]), medians(costs[1][kind][e])
			us0, us1 := float64(c0.d.Nanoseconds())/1e3, float64(c1.d.Nanoseconds())/1e3
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t\n", name, kc.name, c0.allocs, c1.allocs,
				c0.bytes, c1.bytes, us0, us1, us1/us0)
			if c1.allocs > c0.allocs+4 || float64(c1.bytes) > 1.25*float64(c0.bytes)+4096 {
				tb.Errorf("%s (%s container) allocates more at K=%d: %d objects, %d B per call (K=0: %d objects, %d B)",
					name, kc.name, k, c1.allocs, c1.bytes, c0.allocs, c0.bytes)
			}
			worst = max(worst, us1/us0)
			if timed && us1 > 3*us0+2 {
				tb.Errorf("%s (%s container) takes %.1f µs per call at K=%d, %.1f µs at K=0 (%.1fx): work grows with K",
					name, kc.name, us1, k, us0, us1/us0)
			}
		}
	}
	_ = tw.Flush()
	tb.Log("\n" + w.String())
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(worst, "max-time-ratio")
	}
}

// growDirect creates and starts containers 0..n-1 through a's handlers, 4 per pod: 50 exclusive
// (1 CPU), 200 shared (50 millicpu), the rest in the default pool.
func growDirect(t testing.TB, a *nriplugin.Plugin, n int) {
	ctx := context.Background()
	for p := 0; p*4 < n; p++ {
		var entries []string
		for c := range 4 {
			if i := p*4 + c; i < 50 {
				entries = append(entries, fmt.Sprintf(`"c%d": {"exclusive_a": 1}`, c))
			} else if i < 250 {
				entries = append(entries, fmt.Sprintf(`"c%d": {"shared_s": 50}`, c))
			}
		}
		id := fmt.Sprintf("fill%05d", p)
		pod := &api.PodSandbox{Id: "pod-" + id, Uid: "uid-" + id, Name: id, Namespace: "ns",
			Annotations: poolReq("{" + strings.Join(entries, ", ") + "}")}
		if err := a.RunPodSandbox(ctx, pod); err != nil {
			t.Fatal(err)
		}
		for c := 0; c < 4 && p*4+c < n; c++ {
			ctr := &api.Container{Id: fmt.Sprintf("ctr-%s-%d", id, c), PodSandboxId: pod.Id, Name: fmt.Sprint("c", c)}
			if _, _, err := a.CreateContainer(ctx, pod, ctr); err != nil {
				t.Fatal(err)
			}
			if err := a.StartContainer(ctx, pod, ctr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// directLifecycle calls a's handlers for one pod with one container, RunPodSandbox to
// RemovePodSandbox, and returns what each call cost.
func directLifecycle(t testing.TB, a *nriplugin.Plugin, id, req string) (out [len(lifeEvents)]callCost) {
	ctx := context.Background()
	pod := &api.PodSandbox{Id: "pod-" + id, Uid: "uid-" + id, Name: id, Namespace: "bench"}
	if req != "" {
		pod.Annotations = poolReq(req)
	}
	ctr := &api.Container{Id: "ctr-" + id, PodSandboxId: pod.Id, Name: "app"}
	steps := [...]func() error{
		func() error { return a.RunPodSandbox(ctx, pod) },
		func() error { _, _, err := a.CreateContainer(ctx, pod, ctr); return err },
		func() error { return a.StartContainer(ctx, pod, ctr) },
		func() error { _, err := a.StopContainer(ctx, pod, ctr); return err },
		func() error { return a.RemoveContainer(ctx, pod, ctr) },
		func() error { return a.RemovePodSandbox(ctx, pod) },
	}
	var m0, m1 goruntime.MemStats
	for e, step := range steps {
		goruntime.ReadMemStats(&m0)
		start := time.Now()
		err := step()
		d := time.Since(start)
		goruntime.ReadMemStats(&m1)
		if err != nil {
			t.Fatalf("%s %s: %v", lifeEvents[e], id, err)
		}
		out[e] = callCost{allocs: m1.Mallocs - m0.Mallocs, bytes: m1.TotalAlloc - m0.TotalAlloc, d: d}
	}
	return out
}

// medians is the median of each measure.
func medians(cs []callCost) callCost {
	med := func(f func(callCost) uint64) uint64 {
		v := make([]uint64, len(cs))
		for i, c := range cs {
			v[i] = f(c)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return callCost{allocs: med(func(c callCost) uint64 { return c.allocs }),
		bytes: med(func(c callCost) uint64 { return c.bytes }),
		d:     time.Duration(med(func(c callCost) uint64 { return uint64(c.d) }))}
}
