package nriplugin_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/stub"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest/nop"
)

// The benchmark node: 256 CPUs. Existing containers come from grow: with pools, 200 exclusive
// (1 CPU each), 300 shared (50 millicpu each), the rest in the default pool, 4 per pod.
const (
	benchTopology = "sockets=2,cores=64,threads=2"
	benchPools    = `
exclusiveCPUs: threads
pools:
  default:     {cpus: "0-3,128-131"}
  shared_s:    {cpus: "4-11,132-139"}
  exclusive_a: {cpus: "12-127,140-255", hyperThreadingPolicy: multiThreaded}
`
)

func startNop(ctx context.Context, sock string) (stub.Stub, error) {
	s, err := stub.New(nop.Plugin{}, stub.WithPluginName("nop"), stub.WithPluginIdx("10"),
		stub.WithSocketPath(sock), stub.WithLogger(quietNRI{}))
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// grow creates and starts containers from, ..., to-1 (from a multiple of 4) through the
// runtime, 4 per pod: all in the default pool, or (pooled) containers 0-199 exclusive (1 CPU
// each) and 200-499 shared (50 millicpu each).
func grow(tb testing.TB, rt *runtime, from, to int, pooled bool) {
	tb.Helper()
	for p := from / 4; p*4 < to; p++ {
		var ann map[string]string
		if pooled && p*4 < 500 {
			var entries []string
			for c := range 4 {
				if k := p*4 + c; k < 200 {
					entries = append(entries, fmt.Sprintf(`"c%d": {"exclusive_a": 1}`, c))
				} else {
					entries = append(entries, fmt.Sprintf(`"c%d": {"shared_s": 50}`, c))
				}
			}
			ann = poolReq("{" + strings.Join(entries, ", ") + "}")
		}
		pod := rt.runPod(fmt.Sprint("fill", p), ann)
		for c := 0; c < 4 && p*4+c < to; c++ {
			rt.startCtr(rt.mustCreate(pod, fmt.Sprint("c", c), nil).ctr)
		}
	}
}

// timeCreate measures one CreateContainer round trip (an exclusive CPU) and removes the
// container again, untimed, so the state stays the same size.
func timeCreate(b *testing.B, rt *runtime, i int) time.Duration {
	pod := rt.runPod(fmt.Sprint("bench", i), poolReq(`{"app": {"exclusive_a": 1}}`))
	start := time.Now()
	c := rt.mustCreate(pod, "app", nil)
	d := time.Since(start)
	rt.removeCtr(c.ctr)
	rt.removePod(pod)
	return d
}

func percentile(ds []time.Duration, p float64) float64 {
	s := slices.Sorted(slices.Values(ds))
	return float64(s[int(p*float64(len(s)-1))].Nanoseconds()) / 1e3
}

// BenchmarkCreateContainer compares podfence's CreateContainer round trip through the real
// NRI runtime side with a do-nothing plugin's, measured alternately in the same run.
func BenchmarkCreateContainer(b *testing.B) {
	for _, existing := range []int{0, 1000} {
		b.Run(fmt.Sprint("existing=", existing), func(b *testing.B) {
			pf := newRuntime(b)
			startAgent(b, pf, newNode(b, benchTopology, benchPools), openStore(b, b.TempDir()), nriplugin.Options{})
			base := newRuntime(b)
			s, err := startNop(b.Context(), base.sock)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Stop)
			base.waitPlugins(1)
			grow(b, pf, 0, existing, true)
			grow(b, base, 0, existing, true)
			var pfT, baseT []time.Duration
			for i := 0; b.Loop(); i++ {
				pfT = append(pfT, timeCreate(b, pf, i))
				baseT = append(baseT, timeCreate(b, base, i))
			}
			p50, p99 := percentile(pfT, 0.50), percentile(pfT, 0.99)
			b50, b99 := percentile(baseT, 0.50), percentile(baseT, 0.99)
			b.ReportMetric(p50, "p50-µs")
			b.ReportMetric(p99, "p99-µs")
			b.ReportMetric(b50, "nop-p50-µs")
			b.ReportMetric(b99, "nop-p99-µs")
			b.ReportMetric(p50/b50, "p50-ratio")
			b.ReportMetric(p99/b99, "p99-ratio")
		})
	}
}

// met renders whether a target was met.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}
