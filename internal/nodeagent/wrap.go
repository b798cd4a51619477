package nodeagent

import (
	"context"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/pinning"
)

// Starter wraps the entrypoint of containers named in a pod's process pinning annotation
// (podfence.io/cpus, nokia.k8s.io/cpus) so that `podfence start` runs first and pins each
// process to its share of the container's CPUs. Other containers are left as they are.
type Starter struct {
	// Binary is the podfence binary's path on the host (as the runtime sees it), bind-mounted
	// read-only into wrapped containers. It must be statically linked.
	Binary string
}

var _ nriplugin.ContainerCreator = Starter{}

// Name names the extension in logs and errors.
func (Starter) Name() string { return "process-starter" }

// CreateContainer returns the mount, args and environment that start ctr through `podfence
// start`. The planner has checked the processes against the decided pools already
// (plan.Container.Processes): a container whose annotation names another pool or asks for
// more CPUs than it got never gets here.
func (s Starter) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container,
	_ plan.Decision) (*api.ContainerAdjustment, error) {
	procs, named, err := plan.PinningOf(ctr.GetName(), pod.GetAnnotations(), ctr.GetAnnotations())
	if err != nil || !named {
		return nil, err
	}
	w, err := pinning.Wrap(s.Binary, ctr.GetName(), ctr.GetArgs(), procs)
	if err != nil {
		return nil, err
	}
	adj := &api.ContainerAdjustment{}
	adj.AddMount(&api.Mount{Destination: w.Mount.Destination, Type: w.Mount.Type, Source: w.Mount.Source, Options: w.Mount.Options})
	adj.SetArgs(w.Args)
	for _, e := range w.Env {
		adj.AddEnv(e.Name, e.Value)
	}
	return adj, nil
}
