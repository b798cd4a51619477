package nriplugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
)

// Extension is a capability beyond CPU pools — the process starter, core scheduling, EPC
// limits, VM sandbox cgroups — that rides on the agent's NRI events. It implements any of the
// hook interfaces below. The agent calls the hooks after its own work, outside its lock, in
// the order the extensions were given; a panicking hook fails that event only.
type Extension interface {
	Name() string
}

// ContainerCreator adds to a container's CreateContainer adjustment once its CPUs are
// decided. Of the fragment, Args, Env, Mounts, Annotations and Linux.Resources.Unified are
// used. An error refuses the container; nothing else is disturbed.
type ContainerCreator interface {
	CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, d plan.Decision) (*api.ContainerAdjustment, error)
}

// ContainerStarter learns that a container's task exists, before its entrypoint runs
// (NRI StartContainer). An error is logged: the container is already created.
type ContainerStarter interface {
	StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error
}

// ContainerUpdater learns of a resource update the runtime is about to apply (res: what
// was asked; podfence keeps its own cpuset and quota against it). Errors are logged only.
type ContainerUpdater interface {
	UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) error
}

// ContainerRemover learns that a container stopped or was removed (both may come).
type ContainerRemover interface {
	RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container)
}

// PodRunner learns of a new pod sandbox. An error fails the sandbox.
type PodRunner interface {
	RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error
}

// PodRemover learns that a pod sandbox was removed.
type PodRemover interface {
	RemovePodSandbox(ctx context.Context, pod *api.PodSandbox)
}

// Synchronizer rebuilds its state from the runtime's pods and containers at every
// (re)connection. It must not move anything that runs; errors are logged.
type Synchronizer interface {
	Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error
}

// guard runs one hook of extension ext, turning a panic into an error.
func guard(ext Extension, hook string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("extension %s %s: internal error: %v", ext.Name(), hook, r)
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", ext.Name(), err)
	}
	return nil
}

// createHooks runs every ContainerCreator and merges the fragments into adj.
func (a *Plugin) createHooks(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, d plan.Decision,
	adj *api.ContainerAdjustment) error {
	for _, ext := range a.exts {
		h, ok := ext.(ContainerCreator)
		if !ok {
			continue
		}
		err := guard(ext, "CreateContainer", func() error {
			frag, err := h.CreateContainer(ctx, pod, ctr, d)
			merge(adj, frag)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// notify runs hook on every extension that has it, logging errors; it returns them joined.
func (a *Plugin) notify(event string, call func(Extension) (bool, error)) error {
	var errs []error
	for _, ext := range a.exts {
		err := guard(ext, event, func() error { // an extension without the hook returns nil
			_, err := call(ext)
			return err
		})
		if err != nil { // the hook's error, or its panic
			a.log.Error("extension failed", "event", event, "extension", ext.Name(), "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
