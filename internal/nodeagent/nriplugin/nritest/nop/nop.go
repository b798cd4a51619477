// Package nop is the baseline NRI plugin of the agent's benchmarks: it subscribes to the
// events the podfence agent handles and does nothing with them. It imports no test code, so
// the nopplugin binary built from it stays the smallest NRI plugin.
package nop

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// Plugin does nothing at each event.
type Plugin struct{}

var (
	_ stub.SynchronizeInterface     = Plugin{}
	_ stub.ShutdownInterface        = Plugin{}
	_ stub.RunPodInterface          = Plugin{}
	_ stub.RemovePodInterface       = Plugin{}
	_ stub.CreateContainerInterface = Plugin{}
	_ stub.UpdateContainerInterface = Plugin{}
	_ stub.StopContainerInterface   = Plugin{}
	_ stub.RemoveContainerInterface = Plugin{}
	_ stub.StartContainerInterface  = Plugin{}
)

func (Plugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (Plugin) Shutdown(context.Context)                                {}
func (Plugin) RunPodSandbox(context.Context, *api.PodSandbox) error    { return nil }
func (Plugin) RemovePodSandbox(context.Context, *api.PodSandbox) error { return nil }
func (Plugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment,
	[]*api.ContainerUpdate, error) {
	return nil, nil, nil
}
func (Plugin) UpdateContainer(context.Context, *api.PodSandbox, *api.Container, *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (Plugin) StartContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }
func (Plugin) StopContainer(context.Context, *api.PodSandbox, *api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}
func (Plugin) RemoveContainer(context.Context, *api.PodSandbox, *api.Container) error { return nil }
