package nriplugin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/testwait"
)

// The test node: 2 sockets × 4 cores × 2 threads, CPU t*8+c for thread t of core c, so
// socket 0 (NUMA 0) is CPUs 0-3,8-11 and socket 1 (NUMA 1) is 4-7,12-15.
const (
	testTopology = "sockets=2,cores=4,threads=2"
	testPools    = `
pools:
  default:     {cpus: "0,8"}
  shared_s:    {cpus: "1,9"}
  exclusive_a: {cpus: "2-3,10-11", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-7,12-15", hyperThreadingPolicy: multiThreaded}
`
)

func TestMain(m *testing.M) {
	runHogIfAsked()        // a hog process of BenchmarkLifecyclePressure
	nrilog.Set(quietNRI{}) // the runtime side's library logger is global; keep test output readable
	os.Exit(m.Run())
}

type quietNRI struct{}

func (quietNRI) Debugf(context.Context, string, ...any) {}
func (quietNRI) Infof(context.Context, string, ...any)  {}
func (quietNRI) Warnf(context.Context, string, ...any)  {}
func (quietNRI) Errorf(context.Context, string, ...any) {}

// newNode builds a planner node from a synthetic topology and a pool config. The tests' pool
// configs are podfence's own: they list threads and give unpooled CPUs to the default pool
// (exclusiveCPUs: threads, unpooledCPUs: default, unless they say otherwise), and the tests
// expect podfence's former CFS quotas (plan.QuotasSum).
func newNode(tb testing.TB, topo, poolYAML string) *plan.Node {
	tb.Helper()
	t, err := topology.Synthetic(topo)
	if err != nil {
		tb.Fatal(err)
	}
	if !strings.Contains(poolYAML, "exclusiveCPUs:") {
		poolYAML = "exclusiveCPUs: threads\n" + poolYAML
	}
	if !strings.Contains(poolYAML, "unpooledCPUs:") {
		poolYAML = "unpooledCPUs: default\n" + poolYAML
	}
	cfg, err := pools.Parse("test pools", []byte(poolYAML))
	if err != nil {
		tb.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, t)
	if err != nil {
		tb.Fatal(err)
	}
	return plan.NewNode(t, layout, plan.Policy{CFSQuotas: plan.QuotasSum})
}

// testLogger logs to the test log, or nowhere for benchmarks.
func testLogger(tb testing.TB) *slog.Logger {
	if _, ok := tb.(*testing.B); ok {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agentRun is an agent connected to a runtime, as `podfence agent` runs it.
type agentRun struct {
	*nriplugin.Plugin
	cancel context.CancelFunc
	done   chan error
}

// openStore opens a checkpoint directory.
func openStore(tb testing.TB, dir string) *checkpoint.Store {
	tb.Helper()
	store, err := checkpoint.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// startAgent starts an agent on rt's socket with checkpoint cp and waits for its first
// Synchronize.
func startAgent(tb testing.TB, rt *runtime, node *plan.Node, cp nriplugin.Checkpoint, opts nriplugin.Options) *agentRun {
	tb.Helper()
	return startAgentLog(tb, rt, node, cp, opts, testLogger(tb))
}

// startAgentLog is startAgent with the agent's logger.
func startAgentLog(tb testing.TB, rt *runtime, node *plan.Node, cp nriplugin.Checkpoint, opts nriplugin.Options,
	log *slog.Logger) *agentRun {
	tb.Helper()
	ar := &agentRun{Plugin: nriplugin.New(node, cp, log, opts), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ar.cancel = cancel
	go func() {
		ar.done <- ar.Run(ctx, nriplugin.Connection{Socket: rt.sock, PluginName: "podfence", PluginIndex: "10",
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	}()
	tb.Cleanup(ar.stop)
	ar.waitSync(tb, rt, 1)
	return ar
}

// waitSync waits for the agent's n-th Synchronize and for the runtime to register it.
func (ar *agentRun) waitSync(tb testing.TB, rt *runtime, n int) {
	tb.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(tb))
	defer cancel()
	if err := ar.WaitSynchronized(ctx, n); err != nil {
		tb.Fatalf("agent not synchronized %d times: %v", n, err)
	}
	rt.nri.BlockPluginSync().Unblock()
}

// stop disconnects the agent and flushes its checkpoint, as on SIGTERM.
func (ar *agentRun) stop() {
	if ar.cancel == nil {
		return
	}
	ar.cancel()
	<-ar.done
	ar.cancel = nil
	_ = ar.Close()
}

// kill disconnects the agent without flushing its checkpoint, as SIGKILL does: records still
// queued are never written.
func (ar *agentRun) kill() {
	if ar.cancel == nil {
		return
	}
	ar.cancel()
	<-ar.done
	ar.cancel = nil
}

// runtime plays containerd: it keeps pods and containers, relays events through the real
// NRI runtime side (adaptation) and applies the adjustments and updates it gets back.
type runtime struct {
	tb   testing.TB
	dir  string
	sock string
	nri  *adaptation.Adaptation

	mu         sync.Mutex
	pods       map[string]*api.PodSandbox
	ctrs       map[string]*api.Container
	syncUpd    []*api.ContainerUpdate // updates plugins asked at Synchronize
	unsolicted []*api.ContainerUpdate // updates plugins asked outside a request
	seq        int
	syncs      int             // synchronizations since start: 1 at start-up, then 1 per plugin
	syncLat    []time.Duration // how long each plugin's Synchronize took

	// kill, if set, makes stop end plugin connections as a runtime process exit does (the
	// runtime side's Stop leaves external plugins connected): plugins connect through a
	// proxy that stop closes.
	kill  bool
	proxy *proxy
}

func newRuntime(tb testing.TB) *runtime {
	dir := nritest.ShortDir(tb)
	rt := &runtime{tb: tb, dir: dir, sock: filepath.Join(dir, "nri.sock"),
		pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}}
	rt.start()
	tb.Cleanup(rt.stop)
	return rt
}

func (rt *runtime) start() {
	rt.tb.Helper()
	sock := rt.sock
	if rt.kill {
		sock = filepath.Join(rt.dir, "rt.sock")
	}
	nritest.NoPluginTimeouts()
	r, err := adaptation.New("fake-runtime", "1.0.0", rt.synchronize, rt.update,
		adaptation.WithPluginPath(filepath.Join(rt.dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(rt.dir, "conf.d")),
		adaptation.WithSocketPath(sock))
	if err != nil {
		rt.tb.Fatal(err)
	}
	rt.mu.Lock()
	rt.syncs = 0
	rt.mu.Unlock()
	if err := r.Start(); err != nil {
		rt.tb.Fatal(err)
	}
	rt.nri = r
	if rt.kill {
		if rt.proxy, err = startProxy(rt.sock, sock); err != nil {
			rt.tb.Fatal(err)
		}
	}
}

func (rt *runtime) stop() {
	if rt.proxy != nil {
		rt.proxy.close()
		rt.proxy = nil
	}
	if rt.nri != nil {
		rt.nri.Stop()
		rt.nri = nil
	}
}

func (rt *runtime) synchronize(ctx context.Context, cb adaptation.SyncCB) error {
	rt.mu.Lock()
	var pods []*api.PodSandbox
	var ctrs []*api.Container
	for _, p := range rt.pods {
		pods = append(pods, p)
	}
	for _, c := range rt.ctrs {
		ctrs = append(ctrs, c)
	}
	rt.mu.Unlock()
	start := time.Now()
	upd, err := cb(ctx, pods, ctrs)
	took := time.Since(start)
	rt.mu.Lock()
	rt.syncLat = append(rt.syncLat, took)
	rt.syncUpd = append(rt.syncUpd, upd...)
	rt.syncs++
	rt.mu.Unlock()
	return err
}

// lastSync is how long the last Synchronize took.
func (rt *runtime) lastSync() time.Duration {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.syncLat[len(rt.syncLat)-1]
}

// waitPlugins waits until n plugins have been synchronized and registered since start.
func (rt *runtime) waitPlugins(n int) {
	rt.tb.Helper()
	testwait.Eventually(rt.tb, fmt.Sprintf("%d plugins synchronized", n), func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.syncs >= 1+n
	})
	rt.nri.BlockPluginSync().Unblock()
}

func (rt *runtime) update(_ context.Context, upd []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	rt.mu.Lock()
	rt.unsolicted = append(rt.unsolicted, upd...)
	rt.mu.Unlock()
	return nil, nil
}

func (rt *runtime) nextID(prefix string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.seq++
	return fmt.Sprintf("%s%04d", prefix, rt.seq)
}

// runPod starts a pod sandbox.
func (rt *runtime) runPod(name string, annotations map[string]string) *api.PodSandbox {
	rt.tb.Helper()
	id := rt.nextID("pod")
	pod := &api.PodSandbox{Id: id, Name: name, Uid: "uid-" + id, Namespace: "ns", Annotations: annotations}
	b := rt.nri.BlockPluginSync()
	defer b.Unblock()
	if err := rt.nri.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		rt.tb.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	rt.mu.Lock()
	rt.pods[id] = pod
	rt.mu.Unlock()
	return pod
}
