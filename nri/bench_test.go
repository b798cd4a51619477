package nri_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/podfence/podfence/checkpoint"
	"github.com/podfence/podfence/nri"
	"github.com/podfence/podfence/plan"
	"github.com/podfence/podfence/pools"
	"github.com/podfence/podfence/topology"
)

// The benchmark node: 256 CPUs. 1,000 existing containers: 200 exclusive (1 CPU each),
// 300 shared (50 millicpu each) and 500 in the default pool, 4 per pod.
const (
	benchTopology = "sockets=2,cores=64,threads=2"
	benchPools    = `
pools:
  default:     {cpus: "0-3,128-131"}
  shared_s:    {cpus: "4-11,132-139"}
  exclusive_a: {cpus: "12-127,140-255", hyperThreadingPolicy: multiThreaded}
`
)

// nopPlugin is the baseline: a plugin that subscribes to CreateContainer and does nothing.
type nopPlugin struct{}

func (nopPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

func startNop(ctx context.Context, sock string) (stub.Stub, error) {
	s, err := stub.New(nopPlugin{}, stub.WithPluginName("nop"), stub.WithPluginIdx("10"),
		stub.WithSocketPath(sock), stub.WithLogger(quietNRI{}))
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// fill creates n containers through the runtime, 4 per pod, with the mix above.
func fill(tb testing.TB, rt *runtime, n int) {
	tb.Helper()
	for p := 0; p*4 < n; p++ {
		var entries []string
		for c := range 4 {
			switch k := p*4 + c; {
			case k < 200:
				entries = append(entries, fmt.Sprintf(`"c%d": {"exclusive_a": 1}`, c))
			case k < 500:
				entries = append(entries, fmt.Sprintf(`"c%d": {"shared_s": 50}`, c))
			}
		}
		pod := rt.runPod(fmt.Sprint("fill", p), poolReq("{"+strings.Join(entries, ", ")+"}"))
		for c := 0; c < 4 && p*4+c < n; c++ {
			rt.mustCreate(pod, fmt.Sprint("c", c), nil)
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
			startAgent(b, pf, newNode(b, benchTopology, benchPools), openStore(b, b.TempDir()), nri.Options{})
			base := newRuntime(b)
			s, err := startNop(b.Context(), base.sock)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Stop)
			base.waitPlugins(1)
			fill(b, pf, existing)
			fill(b, base, existing)
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

// rssChildEnv makes the test binary run one plugin and nothing else (see rssChild):
// "podfence <socket> <checkpoint dir>" or "nop <socket>".
const rssChildEnv = "PODFENCE_TEST_RSS_CHILD"

// rssChild runs a plugin alone in this process until SIGTERM, so its RSS is the plugin's.
func rssChild() int {
	args := strings.Fields(os.Getenv(rssChildEnv))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if args[0] == "nop" {
		s, err := startNop(ctx, args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-ctx.Done()
		s.Stop()
		return 0
	}
	topo, _ := topology.Synthetic(benchTopology)
	cfg, _ := pools.Parse("bench", []byte(benchPools))
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store, err := checkpoint.Open(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a := nri.New(plan.NewNode(topo, layout, plan.Policy{}), store, slog.New(slog.DiscardHandler), nri.Options{})
	err = a.Run(ctx, nri.Connection{Socket: args[1], PluginName: "podfence", PluginIndex: "10"})
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// childRSS starts a plugin process on rt, adds 1,000 containers and returns its VmRSS in
// MiB before and after.
func childRSS(b *testing.B, rt *runtime, args string) (before, after float64) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), rssChildEnv+"="+args)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	rt.waitPlugins(1)
	before = vmRSS(b, cmd.Process.Pid)
	fill(b, rt, 1000)
	time.Sleep(200 * time.Millisecond) // let the checkpoint writer finish
	return before, vmRSS(b, cmd.Process.Pid)
}

func vmRSS(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// BenchmarkAgentRSS reports the agent process's resident memory with 1,000 containers, next
// to a do-nothing plugin process in the same state.
func BenchmarkAgentRSS(b *testing.B) {
	pf, base := newRuntime(b), newRuntime(b)
	pf0, pf1000 := childRSS(b, pf, "podfence "+pf.sock+" "+b.TempDir())
	nop0, nop1000 := childRSS(b, base, "nop "+base.sock)
	for b.Loop() {
	}
	b.ReportMetric(pf0, "rss0-MiB")
	b.ReportMetric(pf1000, "rss1000-MiB")
	b.ReportMetric(nop0, "nop-rss0-MiB")
	b.ReportMetric(nop1000, "nop-rss1000-MiB")
}
