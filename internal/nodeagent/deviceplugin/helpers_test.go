package deviceplugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/testwait"
)

// testTopo is 2 sockets (NUMA 0 and 1) × 4 cores × 2 threads: core c has CPUs c and c+8;
// NUMA 0 holds CPUs 0-3,8-11 and NUMA 1 holds 4-7,12-15.
const testTopo = "sockets=2,cores=4,threads=2"

// testPools: exclusive_dp has cores 2,3 on NUMA 0 and 4,5,6 on NUMA 1; exclusive_rt is
// singleThreaded on core 7 (one device, CPU 7). A podfence-own config: it lists threads.
const testPools = `
exclusiveCPUs: threads
pools:
  default:      {cpus: "0,8"}
  shared_caas:  {cpus: "1,9"}
  exclusive_dp: {cpus: "2-6,10-14", hyperThreadingPolicy: multiThreaded}
  exclusive_rt: {cpus: "7,15"}
`

func testNode(t testing.TB, spec, yaml string) *plan.Node {
	t.Helper()
	topo, err := topology.Synthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("poolconfig-test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	pn, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	return plan.NewNode(topo, pn, plan.Policy{})
}

// shortDir is a temp dir with a short path: unix socket paths are limited to 107 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testLog(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeKubelet is the kubelet's registration service on <dir>/kubelet.sock, the real gRPC API.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	srv  *grpc.Server
	reqs chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, KubeletSocket))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{srv: grpc.NewServer(), reqs: make(chan *pluginapi.RegisterRequest, 100)}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- req
	return &pluginapi.Empty{}, nil
}

// registrations waits for n Register calls and returns them by resource name.
func (k *fakeKubelet) registrations(t *testing.T, n int) map[string]*pluginapi.RegisterRequest {
	t.Helper()
	out := map[string]*pluginapi.RegisterRequest{}
	timeout := time.NewTimer(time.Until(testwait.Deadline(t)))
	defer timeout.Stop()
	for len(out) < n {
		select {
		case r := <-k.reqs:
			out[r.ResourceName] = r
		case <-timeout.C:
			t.Fatalf("got %d registrations, want %d: %v", len(out), n, out)
		}
	}
	return out
}

// runPlugin runs a plugin for node until the test ends; stop ends it early and returns
// Run's result.
func runPlugin(t *testing.T, node *plan.Node, opts Options) (p *Plugin, stop func() error) {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	p, err := New(node, opts, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p, stop
}

// passes counts the passes of Run's loop: Run calls Options.Online once a pass, after the
// pass's sync (serving missing sockets, registering with the kubelet), so a call proves that
// the sync before it has finished. Online reports every CPU of the node online.
type passes struct {
	online cpuset.CPUSet
	n      atomic.Int64
}

func newPasses(node *plan.Node) *passes { return &passes{online: node.Topology.Online()} }

func (p *passes) Online() (cpuset.CPUSet, error) {
	p.n.Add(1)
	return p.online, nil
}

// wait waits until n passes that start after this call have run their sync.
func (p *passes) wait(t *testing.T, n int64) {
	t.Helper()
	// The next call may end a pass whose sync began before this call; the n after it
	// end passes that began after it.
	want := p.n.Load() + 1 + n
	testwait.Eventually(t, fmt.Sprintf("%d passes of Run's loop", n), func() bool { return p.n.Load() >= want })
}

// dial connects to a registered endpoint the way the kubelet does.
func dial(t *testing.T, dir string, reg *pluginapi.RegisterRequest) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, reg.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// started runs the plugin on testPools with a kubelet and returns a client per resource.
func started(t *testing.T) (*Plugin, map[string]pluginapi.DevicePluginClient) {
	t.Helper()
	dir := shortDir(t)
	k := startKubelet(t, dir)
	p, _ := runPlugin(t, testNode(t, testTopo, testPools), Options{Dir: dir})
	clients := map[string]pluginapi.DevicePluginClient{}
	for name, reg := range k.registrations(t, 3) {
		clients[name] = dial(t, dir, reg)
	}
	return p, clients
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	t.Cleanup(cancel)
	return ctx
}
