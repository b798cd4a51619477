package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

// The NRI events the agent handles; the stub subscribes to exactly these.
var (
	_ stub.SynchronizeInterface     = (*Plugin)(nil)
	_ stub.ShutdownInterface        = (*Plugin)(nil)
	_ stub.RunPodInterface          = (*Plugin)(nil)
	_ stub.RemovePodInterface       = (*Plugin)(nil)
	_ stub.CreateContainerInterface = (*Plugin)(nil)
	_ stub.UpdateContainerInterface = (*Plugin)(nil)
	_ stub.StopContainerInterface   = (*Plugin)(nil)
	_ stub.RemoveContainerInterface = (*Plugin)(nil)
	_ stub.StartContainerInterface  = (*Plugin)(nil)
)

// recovered turns a panic in a handler into that request's error, so one bad container
// fails alone and the agent keeps serving. Use as: defer a.recovered(event, &err).
func (a *Plugin) recovered(event string, err *error) {
	if r := recover(); r != nil {
		a.log.Error("handler panicked", "event", event, "panic", r, "stack", string(debug.Stack()))
		*err = fmt.Errorf("podfence %s: internal error: %v", event, r)
	}
}

// RunPodSandbox logs the sandbox's place: the default pool. NRI cannot adjust the sandbox
// container, and it holds nothing, so nothing is recorded. The devices the kubelet allocated
// to a pod without a pool request annotation are read here, for its containers.
func (a *Plugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) (err error) {
	defer a.recovered("RunPodSandbox", &err)
	c := plan.Container{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Sandbox: true}
	a.mu.Lock()
	d, err := a.node.Load().Plan(a.state, c)
	a.mu.Unlock()
	if err != nil {
		return err
	}
	a.kubelet.prefetch(pod, func(err error) { // for its containers, in the background (kubelet.go)
		a.log.Debug("kubelet pod resources not read at RunPodSandbox; its containers ask again", "pod", podName(pod), "err", err)
	})
	a.logDecision("RunPodSandbox", pod, nil, d)
	return a.notify("RunPodSandbox", func(e Extension) (bool, error) {
		h, ok := e.(PodRunner)
		if !ok {
			return false, nil
		}
		return true, h.RunPodSandbox(ctx, pod)
	})
}

// CreateContainer plans the container and returns its adjustment. A refused container gets
// an error naming the reason; nothing else changes.
func (a *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (_ *api.ContainerAdjustment,
	_ []*api.ContainerUpdate, err error) {
	defer a.recovered("CreateContainer", &err)
	c, view, err := a.requestWithClaims(ctx, pod, ctr, true) // view: pod with its DRA claims' EPC (claims.go)
	if err != nil {
		return nil, nil, a.refused(pod, ctr, err)
	}
	d, undo, err := a.allocate(c, ctr.GetId(), ctr.GetPodSandboxId())
	a.retryIfDue()
	if err != nil {
		return nil, nil, a.refused(pod, ctr, err)
	}
	committed := false
	defer func() {
		if !committed {
			undo()
		}
	}()
	adj := adjustment(d)
	if err := a.createHooks(ctx, view, ctr, d, adj); err != nil {
		return nil, nil, a.refused(pod, ctr, err)
	}
	committed = true
	a.logDecision("CreateContainer", pod, ctr, d)
	return adj, nil, nil
}

// allocate records c's allocation for container instance id of pod sandbox sandbox. A
// previous instance of the same container (same pod and name: a restart, perhaps in a
// re-created sandbox) gives its allocation up first. A sidecar's kept one (StopContainer)
// goes to its new instance when the request still asks for it (again), and is kept still
// when the new instance is refused, here or by undo (which releases what id got).
func (a *Plugin) allocate(c plan.Container, id, sandbox string) (plan.Decision, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old, ok := a.hold.holderOf(c.Key())
	kept := old.kept && old.id != id // old is the zero holder when !ok
	var prev allocation.Allocation
	if ok && old.id != id {
		prev, _ = a.state.Get(c.Key())
		a.releaseLocked(c.Key())
	}
	keepPrev := func() {
		if kept && a.state.Add(prev) == nil {
			a.record(old.id, old.sandbox, prev, true)
			a.hold.keep(old.id)
		}
	}
	var d plan.Decision
	var err error
	if kept {
		d, err = a.again(c, prev)
	} else {
		d, err = a.node.Load().Allocate(a.state, c)
	}
	if err != nil {
		keepPrev()
		return d, nil, err
	}
	if !d.Existing {
		if err := a.fitsTaking(c); err != nil { // a layout is being written down (layout.go)
			a.state.Release(c.Key())
			keepPrev()
			return d, nil, err
		}
	}
	a.record(id, sandbox, d.Allocation, !d.Existing)
	undo := func() {
		a.releaseAnd(id, func() {
			if _, taken := a.hold.holderOf(c.Key()); !taken {
				keepPrev()
			}
		})
	}
	return d, undo, nil
}

// again plans c, a sidecar's new instance: on the exclusive CPUs prev, its kept allocation,
// held, when its request still asks for them (no exact CPUs of its own, as many of the same
// pools), else anew. The caller holds mu.
func (a *Plugin) again(c plan.Container, prev allocation.Allocation) (plan.Decision, error) {
	node := a.node.Load()
	if prev.Type == allocation.TypeExclusive && c.ExclusiveCPUs.IsEmpty() {
		same := c
		same.ExclusiveCPUs = prev.CPUs
		if d, err := node.Allocate(a.state, same); err == nil {
			return d, nil
		}
	}
	return node.Allocate(a.state, c)
}

// UpdateContainer answers a resource update that would change podfence's cpuset, memory
// nodes or quota with an update that keeps them. Other updates pass untouched.
func (a *Plugin) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container,
	res *api.LinuxResources) (_ []*api.ContainerUpdate, err error) {
	defer a.recovered("UpdateContainer", &err)
	defer func() {
		_ = a.notify("UpdateContainer", func(e Extension) (bool, error) {
			h, ok := e.(ContainerUpdater)
			if !ok {
				return false, nil
			}
			return true, h.UpdateContainer(ctx, pod, ctr, res)
		})
	}()
	a.mu.Lock()
	k, held := a.hold.key(ctr.GetId())
	var d plan.Decision
	if held {
		d, err = a.node.Load().Plan(a.state, plan.Container{PodUID: k.PodUID, Name: k.Container})
	}
	a.mu.Unlock()
	if !held || err != nil {
		return nil, err
	}
	u, asked := keep(ctr.GetId(), d, res)
	if u == nil {
		return nil, nil
	}
	a.log.Warn("kept CPU settings against a resource update", "pod", podName(pod), "container", ctr.GetName(),
		"asked", asked, "cpus", d.CPUs.String(), "mems", d.Mems.String(), "quota", d.Quota)
	return []*api.ContainerUpdate{u}, nil
}

// StopContainer releases the container's CPUs: a stopped container never runs again (the
// kubelet creates a new instance). The runtime tells it when a container exits too, so a
// plain init container's CPUs go to the containers that follow it. A native sidecar
// (podfence.io/sidecars) runs for the pod's whole life: what it holds is kept for its next
// instance, and no other container gets it (the pod's removal, or that of this instance,
// frees it).
func (a *Plugin) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (_ []*api.ContainerUpdate, err error) {
	defer a.recovered("StopContainer", &err)
	if podapi.IsSidecar(pod.GetAnnotations(), ctr.GetName()) {
		a.mu.Lock()
		kept := a.hold.keep(ctr.GetId())
		a.mu.Unlock()
		if kept {
			a.log.Info("kept for the sidecar's restart", "pod", podName(pod), "container", ctr.GetName())
		}
	} else {
		a.release(ctr.GetId())
	}
	a.removed(ctx, "StopContainer", pod, ctr)
	return nil, nil
}

// RemoveContainer releases the container if StopContainer did not.
func (a *Plugin) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	defer a.recovered("RemoveContainer", &err)
	a.release(ctr.GetId())
	a.removed(ctx, "RemoveContainer", pod, ctr)
	return nil
}

// StartContainer tells the extensions that the container's task exists: its init process
// runs, its entrypoint has not started. Their errors are logged only.
func (a *Plugin) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (err error) {
	defer a.recovered("StartContainer", &err)
	_ = a.notify("StartContainer", func(e Extension) (bool, error) {
		h, ok := e.(ContainerStarter)
		if !ok {
			return false, nil
		}
		return true, h.StartContainer(ctx, pod, ctr)
	})
	return nil
}

func (a *Plugin) removed(ctx context.Context, event string, pod *api.PodSandbox, ctr *api.Container) {
	_ = a.notify(event, func(e Extension) (bool, error) {
		h, ok := e.(ContainerRemover)
		if ok {
			h.RemoveContainer(ctx, pod, ctr)
		}
		return ok, nil
	})
}

// RemovePodSandbox releases whatever the containers of this sandbox still hold. Containers
// of the same pod in another sandbox (the kubelet re-creates a dead sandbox under the same
// pod UID and removes the old one later) keep theirs.
func (a *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) (err error) {
	defer a.recovered("RemovePodSandbox", &err)
	var freed []allocation.Allocation
	a.mu.Lock()
	for _, k := range a.hold.inSandbox(pod.GetId()) {
		if al, ok := a.state.Get(k); ok {
			freed = append(freed, al)
		}
		a.releaseLocked(k)
	}
	a.mu.Unlock()
	a.kubelet.drop(pod.GetUid())
	a.retryIfDue()
	for _, al := range freed {
		a.logRelease(al)
	}
	_ = a.notify("RemovePodSandbox", func(e Extension) (bool, error) {
		h, ok := e.(PodRemover)
		if ok {
			h.RemovePodSandbox(ctx, pod)
		}
		return ok, nil
	})
	return nil
}

// Shutdown has the checkpoint writer write what is queued without its batch gap: the runtime
// is going away. It does not wait for the disk (Close, at the agent's exit, does).
func (a *Plugin) Shutdown(context.Context) { a.persist.hurry() }

// release frees what container instance id holds, if anything.
func (a *Plugin) release(id string) { a.releaseAnd(id, nil) }

// releaseAnd is release, then after (if not nil) under the same lock.
func (a *Plugin) releaseAnd(id string, after func()) {
	a.mu.Lock()
	k, ok := a.hold.key(id)
	var al allocation.Allocation
	if ok {
		al, _ = a.state.Get(k)
		a.releaseLocked(k)
	}
	if after != nil {
		after()
	}
	a.mu.Unlock()
	a.retryIfDue()
	if ok {
		a.logRelease(al)
	}
}

// refused logs a refusal and returns the error for the runtime, naming pod and container.
func (a *Plugin) refused(pod *api.PodSandbox, ctr *api.Container, err error) error {
	var r *plan.Refusal
	if !errors.As(err, &r) {
		err = fmt.Errorf("pod %s container %q: %w", podName(pod), ctr.GetName(), err)
	}
	a.log.Warn("refused", "pod", podName(pod), "container", ctr.GetName(), "err", err)
	a.observeRefusal(pod, ctr, err)
	return err
}

// logDecision and logRelease log with typed attributes: a value slog must format by
// reflection (a string type such as allocation.PoolType) cost more than the plan itself.
func (a *Plugin) logDecision(event string, pod *api.PodSandbox, ctr *api.Container, d plan.Decision) {
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "decision", slog.String("event", event),
		slog.String("pod", podName(pod)), slog.String("container", ctr.GetName()),
		slog.String("pool", d.Allocation.Pool), slog.String("type", string(d.Allocation.Type)),
		slog.String("cpus", d.CPUs.String()), slog.String("mems", d.Mems.String()),
		slog.Int64("quota", d.Quota), slog.Int64("period", d.Period), slog.Bool("existing", d.Existing))
}

func (a *Plugin) logRelease(al allocation.Allocation) {
	a.log.LogAttrs(context.Background(), slog.LevelInfo, "released", slog.String("pod", al.Namespace+"/"+al.Pod),
		slog.String("container", al.Container), slog.String("pool", al.Pool), slog.String("cpus", al.CPUs.String()),
		slog.Int64("milliCPU", al.MilliCPU))
}

func podName(pod *api.PodSandbox) string { return pod.GetNamespace() + "/" + pod.GetName() }
