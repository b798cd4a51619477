package nodeagent_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/dashboard"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/testwait"
	"github.com/podfence/podfence/podapi"
)

// TestOperations runs the agent with every extension, metrics and Events on the real NRI
// runtime side: a refusal is counted and becomes an Event on its pod, the pools are
// measured, and every metric the Grafana dashboard and the alert rules name is one the
// agent registers.
func TestOperations(t *testing.T) {
	server := newEventServer(t)
	cfg := config(t)
	cfg.Registry = metrics.NewRegistry()
	cfg.CgroupRoot = cgroupstest.Tree(t, "v2")
	cfg.VMRuntimes = []string{"kata"}
	cfg.Events, cfg.Kubeconfig = true, server.kubeconfig(t)
	rt := startRuntime(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- nodeagent.Run(ctx, cfg, quiet()) }()
	defer func() { cancel(); <-done }()
	rt.WaitSynced(t, 1) // the agent

	pod := &api.PodSandbox{Id: "p1", Uid: "uid-1", Name: "web", Namespace: "shop", Annotations: map[string]string{
		podapi.AnnotationCPUPools:        `{"app": {"exclusive_a": 2, "shared_s": 100}, "huge": {"exclusive_a": 3}}`,
		"epc-limit.nri.io/container.app": "1Mi"}}
	rt.create(t, pod, "app", cgroupstest.ContainerSystemd, true)
	rt.create(t, pod, "huge", "/kubepods/poduid-1/huge", false)

	ev := server.wait(t)
	if ev.Reason != "NotEnoughCPUs" || ev.Type != "Warning" || ev.InvolvedObject.UID != "uid-1" || ev.InvolvedObject.Name != "web" ||
		ev.InvolvedObject.FieldPath != "spec.containers{huge}" || ev.Source.Host != "node-a" || !strings.Contains(ev.Message,
		`container "huge" refused`) {
		t.Errorf("event %+v", ev)
	}
	for _, tc := range []struct{ name, want string }{
		{"podfence_refused_containers_total", `podfence_refused_containers_total{reason="NotEnoughCPUs"} 1`},
		{"podfence_pool_allocated_cpus", `podfence_pool_allocated_cpus{pool="exclusive_a"} 2`},
		{"podfence_pool_shared_millicpu_granted", `podfence_pool_shared_millicpu_granted{pool="shared_s"} 100`},
		{"podfence_agent_ready", `podfence_agent_ready 1`},
		{"podfence_epc_container_limit_bytes", `podfence_epc_container_limit_bytes{container="app",namespace="shop",pod="web"} 1.048576e+06`},
	} {
		if err := testutil.GatherAndCompare(cfg.Registry, strings.NewReader(help(t, cfg.Registry, tc.name)+tc.want+"\n"), tc.name); err != nil {
			t.Error(err)
		}
	}

	names := append(dashboard.MetricNames(dashboardQueries(t)), dashboard.MetricNames(alertExprs(t))...)
	if len(names) < 25 {
		t.Fatalf("the dashboard and alerts name %d metrics: %q", len(names), names)
	}
	for _, n := range names {
		if !registered(t, cfg.Registry, n) {
			t.Errorf("the dashboard or an alert names %s, which the agent does not register", n)
		}
	}
}

// eventServer is an API server that takes Events.
type eventServer struct {
	*httptest.Server
	events chan corev1.Event
}

func newEventServer(t *testing.T) *eventServer {
	s := &eventServer{events: make(chan corev1.Event, 10)}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev corev1.Event
		if r.URL.Path != "/api/v1/namespaces/shop/events" || json.NewDecoder(r.Body).Decode(&ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.events <- ev
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *eventServer) kubeconfig(t *testing.T) string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	text := "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" +
		"clusters: [{name: k, cluster: {server: '" + s.URL + "', certificate-authority: ca.pem}}]\nusers: [{name: u, user: {token: t}}]\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *eventServer) wait(t *testing.T) corev1.Event {
	t.Helper()
	return testwait.Receive(t, s.events, "an event posted")
}

// opsRuntime is the NRI runtime side.
type opsRuntime struct{ *nritest.Runtime }

func startRuntime(t *testing.T, cfg nodeagent.Config) *opsRuntime {
	return &opsRuntime{nritest.StartRuntime(t, cfg.Socket)}
}

func (rt *opsRuntime) create(t *testing.T, pod *api.PodSandbox, name, cgroupsPath string, ok bool) {
	t.Helper()
	ctr := &api.Container{Id: pod.Id + "-" + name, PodSandboxId: pod.Id, Name: name,
		Linux: &api.LinuxContainer{CgroupsPath: cgroupsPath, Resources: &api.LinuxResources{}}}
	_, err := rt.Create(context.Background(), pod, ctr)
	if (err == nil) != ok {
		t.Fatalf("create %s: %v", name, err)
	}
}
