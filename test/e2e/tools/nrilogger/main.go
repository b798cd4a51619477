// Command pf-nri-logger is a minimal NRI plugin for the e2e harness: it prints one JSON
// line per pod/container event it receives and can optionally adjust created containers
// (cpuset, env), which proves that NRI is live and that adjustments reach the container.
//
// containerd's own sample plugins (github.com/containerd/nri/plugins/logger, ...) are
// separate modules that the Go module proxy does not serve, hence this small stand-in.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type plugin struct {
	mu     sync.Mutex
	out    *json.Encoder
	cpuset string
	env    []string
}

type event struct {
	Time      string            `json:"time"`
	Event     string            `json:"event"`
	Pod       string            `json:"pod,omitempty"`
	PodUID    string            `json:"podUID,omitempty"`
	Handler   string            `json:"runtimeHandler,omitempty"`
	Container string            `json:"container,omitempty"`
	ID        string            `json:"id,omitempty"`
	Pid       uint32            `json:"pid,omitempty"`
	Cpus      string            `json:"cpus,omitempty"`
	Annots    map[string]string `json:"annotations,omitempty"`
	Adjusted  string            `json:"adjustedCpus,omitempty"`
	Info      string            `json:"info,omitempty"`
}

func (p *plugin) emit(e event) {
	e.Time = time.Now().Format(time.RFC3339Nano)
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.out.Encode(e)
}

func podEvent(name string, pod *api.PodSandbox) event {
	return event{Event: name, Pod: pod.GetNamespace() + "/" + pod.GetName(), PodUID: pod.GetUid(),
		Handler: pod.GetRuntimeHandler(), ID: pod.GetId(), Annots: pod.GetAnnotations()}
}

func ctrEvent(name string, pod *api.PodSandbox, c *api.Container) event {
	e := podEvent(name, pod)
	e.Annots = nil
	e.Container, e.ID, e.Pid = c.GetName(), c.GetId(), c.GetPid()
	if cpu := c.GetLinux().GetResources().GetCpu(); cpu != nil {
		e.Cpus = cpu.GetCpus()
	}
	return e
}

func (p *plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.emit(event{Event: "Configure", Info: runtime + " " + version})
	return 0, nil // 0: subscribe to every event the plugin implements
}

func (p *plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.emit(event{Event: "Synchronize", Info: fmt.Sprintf("%d pods, %d containers", len(pods), len(ctrs))})
	return nil, nil
}

func (p *plugin) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.emit(podEvent("RunPodSandbox", pod))
	return nil
}

func (p *plugin) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.emit(podEvent("StopPodSandbox", pod))
	return nil
}

func (p *plugin) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	p.emit(podEvent("RemovePodSandbox", pod))
	return nil
}

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	e := ctrEvent("CreateContainer", pod, c)
	adj := &api.ContainerAdjustment{}
	if p.cpuset != "" {
		adj.SetLinuxCPUSetCPUs(p.cpuset)
		e.Adjusted = p.cpuset
	}
	for _, kv := range p.env {
		k, v, _ := strings.Cut(kv, "=")
		adj.AddEnv(k, v)
	}
	p.emit(e)
	return adj, nil, nil
}

func (p *plugin) StartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	p.emit(ctrEvent("StartContainer", pod, c))
	return nil
}

func (p *plugin) PostStartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	p.emit(ctrEvent("PostStartContainer", pod, c))
	return nil
}

func (p *plugin) StopContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	p.emit(ctrEvent("StopContainer", pod, c))
	return nil, nil
}

func (p *plugin) RemoveContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	p.emit(ctrEvent("RemoveContainer", pod, c))
	return nil
}

func (p *plugin) Shutdown(context.Context) {
	p.emit(event{Event: "Shutdown"})
}

type envList []string

func (l *envList) String() string     { return strings.Join(*l, ",") }
func (l *envList) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var (
		socket = flag.String("socket", "/var/run/nri/nri.sock", "NRI socket of the runtime")
		name   = flag.String("name", "pf-nri-logger", "plugin name")
		idx    = flag.String("idx", "50", "plugin index (two digits)")
		cpuset = flag.String("cpuset", "", "if set, adjust every created container's cpuset to this CPU list")
		env    envList
	)
	flag.Var(&env, "env", "KEY=VALUE to add to every created container (repeatable)")
	flag.Parse()

	p := &plugin{out: json.NewEncoder(os.Stdout), cpuset: *cpuset, env: env}
	s, err := stub.New(p,
		stub.WithSocketPath(*socket),
		stub.WithPluginName(*name),
		stub.WithPluginIdx(*idx),
		stub.WithOnClose(func() {
			p.emit(event{Event: "Closed"})
			os.Exit(0)
		}),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pf-nri-logger: %v\n", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "pf-nri-logger: %v\n", err)
		os.Exit(1)
	}
}
