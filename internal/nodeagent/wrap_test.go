package nodeagent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent"
	"github.com/podfence/podfence/internal/pinning"
)

func TestStarterWrap(t *testing.T) {
	const ann = `[{"container": "app", "processes": [
		{"process": "/bin/dp", "args": ["-c"], "pool": "exclusive_a", "cpus": %d},
		{"process": "", "args": ["--serve"], "pool": "exclusive_a", "cpus": 1}]}]`
	s := nodeagent.Starter{Binary: "/usr/local/bin/podfence"}
	d := plan.Decision{Allocation: allocation.Allocation{Type: allocation.TypeExclusive, Pool: "exclusive_a", CPUs: cpuset.New(2, 50)},
		CPUs: cpuset.New(2, 50)}
	ctr := &api.Container{Name: "app", Args: []string{"/app"}}
	pod := func(cpus string) *api.PodSandbox {
		return &api.PodSandbox{Annotations: map[string]string{pinning.Key: strings.Replace(ann, "%d", cpus, 1)}}
	}

	adj, err := s.CreateContainer(context.Background(), pod("1"), ctr, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{pinning.MountPath, "start", "--", "/app"}; !slices.Equal(adj.Args, want) {
		t.Errorf("args %q, want %q", adj.Args, want)
	}
	if len(adj.Mounts) != 1 || adj.Mounts[0].Source != s.Binary || adj.Mounts[0].Destination != pinning.MountPath {
		t.Errorf("mounts %v, want the binary at %s", adj.Mounts, pinning.MountPath)
	}
	if len(adj.Env) != 2 || adj.Env[0].Key != pinning.EnvPinning || adj.Env[1].Value != "app" {
		t.Errorf("env %v", adj.Env)
	}

	if adj, err := s.CreateContainer(context.Background(), pod("1"), &api.Container{Name: "sidecar"}, d); adj != nil || err != nil {
		t.Errorf("container without an entry wrapped: %v, %v", adj, err)
	}
	// Processes that do not fit the CPUs are the planner's to refuse (plan.Container.Processes):
	// the starter wraps what it is given.
	if adj, err := s.CreateContainer(context.Background(), pod("2"), ctr, d); adj == nil || err != nil {
		t.Errorf("container not wrapped: %v, %v", adj, err)
	}
	if _, err := s.CreateContainer(context.Background(), pod("1.5"), ctr, d); err == nil || !strings.Contains(err.Error(),
		"annotation "+pinning.Key) {
		t.Errorf("error %v, want the bad annotation named", err)
	}
}
