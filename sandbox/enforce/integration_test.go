package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/podfence/podfence/nri"
	"github.com/podfence/podfence/plan"
	"github.com/podfence/podfence/pools"
	"github.com/podfence/podfence/state"
	"github.com/podfence/podfence/topology"
)

func TestMain(m *testing.M) {
	nrilog.Set(quietNRI{}) // the runtime side's logger is global; keep test output readable
	os.Exit(m.Run())
}

type quietNRI struct{}

func (quietNRI) Debugf(context.Context, string, ...any) {}
func (quietNRI) Infof(context.Context, string, ...any)  {}
func (quietNRI) Warnf(context.Context, string, ...any)  {}
func (quietNRI) Errorf(context.Context, string, ...any) {}

type noCheckpoint struct{}

func (noCheckpoint) Put(state.Allocation) error        { return nil }
func (noCheckpoint) Delete(state.Key) error            { return nil }
func (noCheckpoint) Load() ([]state.Allocation, error) { return nil, nil }

// TestThroughNRI runs the extension in the podfence agent against the real NRI runtime
// side over a Unix socket: a Kata pod's container in a shared pool counts with podfence's
// quota (500m) and cpuset, not its own (none), plus the overhead.
func TestThroughNRI(t *testing.T) {
	f := newFixture(t, "v1")
	dir, err := os.MkdirTemp("", "pfv-") // short: socket paths are limited to ~108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "nri.sock")
	var mu sync.Mutex
	syncs := 0
	rt, err := adaptation.New("test-runtime", "1", func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		mu.Lock()
		syncs++
		mu.Unlock()
		return err
	}, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithSocketPath(sock), adaptation.WithPluginPath(filepath.Join(dir, "none")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "none")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)

	topo, err := topology.Synthetic("sockets=1,cores=2,threads=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("test", []byte("pools:\n  default: {cpus: \"0\"}\n  shared_s: {cpus: \"1\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	a := nri.New(plan.NewNode(topo, layout, plan.Policy{}), noCheckpoint{}, testLogger(f.log), nri.Options{Extensions: []nri.Extension{f.x}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nri.Connection{Socket: sock, PluginName: "podfence", PluginIndex: "10"}) }()
	t.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := syncs
		mu.Unlock()
		if n >= 2 { // the runtime's own, then the agent's
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not connect")
		}
	}
	rt.BlockPluginSync().Unblock()

	pod := kataPod()
	pod.Annotations = map[string]string{nri.AnnotationCPUPools: `{"c1": {"shared_s": 500}}`}
	if err := rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.limits(), (limits{"0", "25000", "167772160"}); got != want {
		t.Errorf("after RunPodSandbox %+v, want %+v", got, want)
	}
	rpl, err := rt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: container("c1", 0, 0, 64*mi, "")})
	if err != nil {
		t.Fatal(err)
	}
	if q := rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetQuota().GetValue(); q != 50000 {
		t.Fatalf("the agent's quota %d, want 50000", q)
	}
	if got, want := f.limits(), (limits{"1", "75000", "234881024"}); got != want {
		t.Errorf("after CreateContainer %+v, want %+v", got, want)
	}
	if err := rt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.n.Root, "cpuset", sbPath)); !os.IsNotExist(err) {
		t.Errorf("sandbox cgroup left after RemovePodSandbox: %v", err)
	}
}
