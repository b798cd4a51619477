package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/podapi"
)

func TestMain(m *testing.M) {
	nritest.QuietLogs() // the runtime side's logger is global; keep test output readable
	os.Exit(m.Run())
}

// TestThroughNRI runs the extension in the podfence agent against the real NRI runtime
// side over a Unix socket: a Kata pod's container in a shared pool counts with podfence's
// quota (500m) and cpuset, not its own (none), plus the overhead.
func TestThroughNRI(t *testing.T) {
	f := newFixture(t, "v1")
	rt := startAgent(t, f)
	ctx := context.Background()

	pod := kataPod()
	pod.Annotations = map[string]string{podapi.AnnotationCPUPools: `{"c1": {"shared_s": 500}}`}
	if err := rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod}); err != nil {
		t.Fatal(err)
	}
	if got, want := f.limits(), (limits{"0", "25000", "167772160"}); got != want {
		t.Errorf("after RunPodSandbox %+v, want %+v", got, want)
	}
	rpl, err := rt.Create(ctx, pod, container("c1", 0, 0, 64*mi, ""))
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

// startAgent runs the podfence agent with f's extension (pools: default CPU 0, shared_s
// CPU 1) against a real NRI runtime side, until the test ends.
func startAgent(t *testing.T, f *fixture) *nritest.Runtime {
	t.Helper()
	rt := nritest.StartRuntime(t, "")
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
	a := nriplugin.New(plan.NewNode(topo, layout, plan.Policy{}), nritest.NoCheckpoint{}, testLogger(f.log),
		nriplugin.Options{Extensions: []nriplugin.Extension{f.x}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, nriplugin.Connection{Socket: rt.Socket, PluginName: "podfence", PluginIndex: "10"})
	}()
	t.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	rt.WaitSynced(t, 1) // the agent
	return rt
}
