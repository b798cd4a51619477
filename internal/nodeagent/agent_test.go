package nodeagent_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/testwait"
	"github.com/podfence/podfence/podapi"
)

const poolConfig = `
exclusiveCPUs: threads
pools:
  exclusive_a: {cpus: "2-3,50-51", hyperThreadingPolicy: multiThreaded}
  shared_s:    {cpus: "4,52"}
nodeSelector: {kubernetes.io/hostname: node-a}
`

// config is an agent config on a captured 2-socket, 96-CPU sysfs tree.
func config(t *testing.T) nodeagent.Config {
	t.Helper()
	dir := nritest.ShortDir(t) // short: the socket path is limited
	poolDir := filepath.Join(dir, "pools")
	if err := os.Mkdir(poolDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(poolDir, "poolconfig-a.yaml"), []byte(poolConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return nodeagent.Config{
		Connection:    nriplugin.Connection{Socket: filepath.Join(dir, "nri.sock"), PluginName: "podfence", PluginIndex: "10"},
		Pools:         poolDir,
		NodeName:      "node-a",
		CheckpointDir: filepath.Join(dir, "checkpoint"),
		Sysfs:         "../cpu/topology/testdata/sysfs/dual-socket-smt-apart",
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestLoadNodeSelectsByNodeName(t *testing.T) {
	cfg := config(t)
	node, err := nodeagent.LoadNode(cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := node.Pools.Pool("exclusive_a"); p.CPUs.String() != "2-3,50-51" {
		t.Errorf("exclusive_a = %s", p.CPUs)
	}
	cfg.NodeName = "node-b"
	_, err = nodeagent.LoadNode(cfg, quiet())
	if err == nil || !strings.Contains(err.Error(),
		`node "node-b": no pool config matches this node (node labels: kubernetes.io/hostname=node-b)`) {
		t.Errorf("error %v, want no match for node-b", err)
	}
}

func TestRunServesTheRuntime(t *testing.T) {
	cfg := config(t)
	cfg.DevicePluginDir = filepath.Join(filepath.Dir(cfg.Socket), "dp") // made once the agent runs, as a late kubelet does
	rt := nritest.StartRuntime(t, cfg.Socket)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, quiet()) }()
	rt.WaitSynced(t, 1) // the agent
	if err := os.Mkdir(cfg.DevicePluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{"podfence-exclusive_a.sock", "podfence-shared_s.sock"} {
		waitFile(t, filepath.Join(cfg.DevicePluginDir, sock), true)
	}

	pod := &api.PodSandbox{Id: "p1", Uid: "uid1", Name: "p", Namespace: "ns",
		Annotations: map[string]string{podapi.AnnotationCPUPools: `{"app": {"exclusive_a": 2}}`}}
	ctr := &api.Container{Id: "c1", PodSandboxId: "p1", Name: "app"}
	rpl, err := rt.Create(ctx, pod, ctr)
	if err != nil {
		t.Fatal(err)
	}
	if got := rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus(); got != "2,50" {
		t.Errorf("cpuset %q, want 2,50 (one whole core)", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(cfg.DevicePluginDir, "podfence-exclusive_a.sock"), false)
	store, err := checkpoint.Open(cfg.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := store.Load(); err != nil || len(recs) != 1 || recs[0].CPUs.String() != "2,50" {
		t.Errorf("checkpoint after shutdown: %v, %v; want the container's record", recs, err)
	}
}

// waitFile waits until path exists (or, with exists false, is gone).
func waitFile(t *testing.T, path string, exists bool) {
	t.Helper()
	testwait.Eventually(t, fmt.Sprintf("%s exists=%v", path, exists), func() bool {
		_, err := os.Stat(path)
		return (err == nil) == exists
	})
}

func TestMain(m *testing.M) {
	nritest.QuietLogs() // the runtime side's library logger is global
	os.Exit(m.Run())
}
