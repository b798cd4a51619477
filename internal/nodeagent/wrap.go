package nodeagent

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/allocation"
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
// start`. The processes are checked against the decided pools first (pinning.Check, as the
// webhook checks them against the requests), so a container whose annotation names
// another pool or asks for more CPUs than it got is refused at creation, with the numbers.
func (s Starter) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container,
	d plan.Decision) (*api.ContainerAdjustment, error) {
	spec, ok, err := pinning.FromAnnotations(pod.GetAnnotations())
	if !ok {
		spec, ok, err = pinning.FromAnnotations(ctr.GetAnnotations())
	}
	if err != nil || !ok {
		return nil, err
	}
	procs, ok := spec.For(ctr.GetName())
	if !ok {
		return nil, nil
	}
	if err := pinning.Check(procs, decidedPools(d)); err != nil {
		return nil, fmt.Errorf("process pinning: %w", err)
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

// decidedPools is what d gives the container, as pinning.Check takes it.
func decidedPools(d plan.Decision) pinning.Pools {
	a, p := d.Allocation, pinning.Pools{}
	if a.Type == allocation.TypeExclusive {
		p.Exclusive, p.MoreExclusive, p.CPUs = a.Pool, a.ExtraPools, a.CPUs.Size()
	}
	if a.MilliCPU > 0 && !d.Shared.IsEmpty() {
		p.Shared, p.MilliCPU = a.SharedPool, int(a.MilliCPU)
	}
	return p
}
