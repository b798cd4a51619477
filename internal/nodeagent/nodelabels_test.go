package nodeagent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/kube/kubeapi/kubeapitest"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/testwait"
	"github.com/podfence/podfence/podapi"
)

// gaugeValue is the value of an unlabelled gauge in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestRunNodeLabelsFromTheAPIServer: without --node-label, the Node's labels, read from the
// API server, select the pool config; a label change that selects another config is pending
// while a running container would move, and taken once it is gone.
func TestRunNodeLabelsFromTheAPIServer(t *testing.T) {
	srv := kubeapitest.NewNodeServer(t, "node-a", map[string]string{"nodeType": "dpdk"})
	cfg := config(t)
	for name, body := range map[string]string{ // instead of config's hostname-selected one
		"poolconfig-a.yaml":    "pools: {exclusive_a: {cpus: \"2-3,50-51\"}}\nnodeSelector: {nodeType: dpdk}\n",
		"poolconfig-caas.yaml": "pools: {exclusive_a: {cpus: \"6-7,54-55\"}}\nnodeSelector: {nodeType: caas}\n",
	} {
		if err := os.WriteFile(filepath.Join(cfg.Pools, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Kubeconfig = srv.Kubeconfig(t, t.TempDir())
	cfg.Registry = metrics.NewRegistry()
	cfg.PoolsReloadInterval = 0 // label changes only
	rt := nritest.StartRuntime(t, cfg.Socket)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, quiet()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	rt.WaitSynced(t, 1)

	create := func(id string) string {
		t.Helper()
		pod := &api.PodSandbox{Id: "p" + id, Uid: "uid" + id, Name: "web" + id, Namespace: "ns",
			Annotations: map[string]string{podapi.AnnotationCPUPools: `{"app": {"exclusive_a": 1}}`}}
		rpl, err := rt.Create(ctx, pod, &api.Container{Id: "c" + id, PodSandboxId: pod.Id, Name: "app"})
		if err != nil {
			t.Fatal(err)
		}
		return rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus()
	}
	if got := create("1"); got != "2" {
		t.Fatalf("cpuset %q, want 2: the config of nodeType=dpdk", got)
	}
	const pending = "podfence_pool_config_pending_blocking_containers"
	if v := gaugeValue(t, cfg.Registry, pending); v != -1 {
		t.Fatalf("%s = %v before the label change", pending, v)
	}

	srv.SetLabels(map[string]string{"nodeType": "caas"})
	testwait.Eventually(t, "the caas config pending, blocked by the running container", func() bool {
		return gaugeValue(t, cfg.Registry, pending) == 1
	})
	pod := &api.PodSandbox{Id: "p1", Uid: "uid1", Name: "web1", Namespace: "ns"}
	if err := rt.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: &api.Container{Id: "c1", PodSandboxId: "p1",
		Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the caas config taken", func() bool { return gaugeValue(t, cfg.Registry, pending) == -1 })
	if got := create("2"); got != "6" {
		t.Errorf("cpuset %q after the change, want 6: the config of nodeType=caas", got)
	}
}
