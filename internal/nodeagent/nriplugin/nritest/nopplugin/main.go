// Command nopplugin is the smallest NRI plugin: it subscribes to the events the podfence
// agent handles and does nothing with them. Benchmarks run it as the baseline process
// beside the real agent binary (BenchmarkAgentBinaryRSS).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type nop struct{}

func (nop) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (nop) RunPodSandbox(context.Context, *api.PodSandbox) error    { return nil }
func (nop) RemovePodSandbox(context.Context, *api.PodSandbox) error { return nil }
func (nop) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment,
	[]*api.ContainerUpdate, error) {
	return nil, nil, nil
}
func (nop) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (nop) StartContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }
func (nop) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (nop) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nopplugin <nri socket>")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := stub.New(nop{}, stub.WithPluginName("nop"), stub.WithPluginIdx("10"), stub.WithSocketPath(os.Args[1]))
	if err == nil {
		err = s.Run(ctx)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
