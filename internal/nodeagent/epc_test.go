package nodeagent_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/observe/metrics"
)

// TestRunAppliesEPCLimits: with a cgroup root and a metrics address, the agent puts a
// container's SGX EPC limit into its adjustment and serves the EPC metrics.
func TestRunAppliesEPCLimits(t *testing.T) {
	cfg := config(t)
	cfg.CgroupRoot = cgroupstest.Tree(t, "v2")
	cfg.Registry = metrics.NewRegistry()
	cfg.MetricsAddress = freeAddress(t)
	rt := nritest.StartRuntime(t, cfg.Socket)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, quiet()) }()
	rt.WaitSynced(t, 1) // the agent

	pod := &api.PodSandbox{Id: "p1", Uid: "uid1", Name: "p", Namespace: "ns",
		Annotations: map[string]string{"epc-limit.nri.io/container.app": "2Mi"}}
	ctr := &api.Container{Id: "c1", PodSandboxId: "p1", Name: "app",
		Linux: &api.LinuxContainer{CgroupsPath: "/kubepods/p1/c1"}}
	rpl, err := rt.Create(ctx, pod, ctr)
	if err != nil {
		t.Fatal(err)
	}
	if got := rpl.GetAdjust().GetLinux().GetResources().GetUnified()["misc.max"]; got != "sgx_epc 2097152" {
		t.Errorf("unified misc.max %q", got)
	}
	body := get(t, "http://"+cfg.MetricsAddress+"/metrics")
	for _, want := range []string{`podfence_epc_supported{cgroup="v2"} 1`, "podfence_epc_capacity_bytes 1.34217728e+08", "go_goroutines "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := get(t, "http://"+cfg.MetricsAddress+"/healthz"); got != "ok\n" {
		t.Errorf("/healthz %q", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + cfg.MetricsAddress + "/healthz"); err == nil {
		t.Error("metrics still served after the agent stopped")
	}
}

func TestRunRefusesTakenMetricsAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config(t)
	cfg.MetricsAddress = ln.Addr().String()
	err = nodeagent.Run(context.Background(), cfg, quiet())
	if err == nil || !strings.HasPrefix(err.Error(), "metrics address "+cfg.MetricsAddress+": ") {
		t.Errorf("error %v", err)
	}
}

// freeAddress returns a loopback address with a port free a moment ago.
func freeAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
