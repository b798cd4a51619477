// Package enforce keeps the host cgroups of VM sandboxes (package sandbox/host) sized to
// their pods (package sandbox), as an extension of the NRI agent (nriplugin.Extension).
//
// A pod whose runtime handler is in the configured list is a VM sandbox. From its
// RunPodSandbox on, the extension holds its sandbox cgroup (podfence-vm-<id> in the pod's
// cgroup) with the limits sandbox.Size gives for the pod's live containers and the
// RuntimeClass overhead, and the sandbox's host processes in it:
//
//   - RunPodSandbox creates or adopts the cgroup with the empty sandbox's limits (the
//     overhead, on the default pool) and moves the shim and hypervisor in.
//   - CreateContainer adds the container, with podfence's decision (its cpuset, and its
//     shared-pool quota in place of the container's own), and resizes before the runtime
//     creates the container (for Kata: before its vCPUs and memory are hot-plugged).
//   - StartContainer re-checks the processes: threads the hypervisor started meanwhile
//     (hot-plugged vCPUs) that are not in the cgroup are moved in.
//   - RemoveContainer (at stop or removal) shrinks; memory is never set below usage (see
//     host.Applied). RemovePodSandbox moves stragglers out and removes the cgroup.
//   - Synchronize rebuilds the sandboxes from the runtime's pods and containers (their
//     reported cpusets and quotas hold podfence's adjustments) and re-applies. A sandbox
//     pid that is no longer a runtime shim's process (reused after the sandbox ended) moves
//     nothing (sandbox.Root).
//   - UpdateContainer takes a container's new limits (an in-place resize, which the agent
//     forwards to extensions after answering it) and resizes.
//
// No hook fails a pod or a container: a failure is logged with the pod, counted per pod
// and step (Collector), and retried at the pod's next event.
package enforce

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
)

var (
	_ nriplugin.PodRunner        = (*Extension)(nil)
	_ nriplugin.ContainerCreator = (*Extension)(nil)
	_ nriplugin.ContainerStarter = (*Extension)(nil)
	_ nriplugin.ContainerRemover = (*Extension)(nil)
	_ nriplugin.ContainerUpdater = (*Extension)(nil)
	_ nriplugin.PodRemover       = (*Extension)(nil)
	_ nriplugin.Synchronizer     = (*Extension)(nil)
)

// Config is what the extension needs.
type Config struct {
	// Root is the cgroupfs mount point ("/sys/fs/cgroup"), Proc the procfs one ("/proc").
	Root, Proc string
	// Runtimes are the VM runtime handlers (sandbox.DefaultRuntimes unless configured).
	Runtimes sandbox.Runtimes
	// EmptyCPUs is the cpuset of a sandbox without containers: the default pool. Empty
	// is not restricted.
	EmptyCPUs cpuset.CPUSet
	// FS is the cgroupfs; nil means cgroups.OS{}.
	FS host.Cgroupfs
}

// Extension is the VM sandbox extension. Create it with New.
type Extension struct {
	log       *slog.Logger
	fs        host.Cgroupfs
	layout    cgroups.Layout
	layoutErr error
	proc      string
	runtimes  sandbox.Runtimes
	emptyCPUs cpuset.CPUSet

	// mu guards what follows and serialises the work on the host.
	mu             sync.Mutex
	pods           map[string]*vm // by pod sandbox ID
	seq            uint64         // sandboxes seen
	removeFailures uint64         // sandbox cgroups left behind
}

// New detects the cgroup layout at cfg.Root and logs it.
func New(cfg Config, log *slog.Logger) *Extension {
	fs := cfg.FS
	if fs == nil {
		fs = cgroups.OS{}
	}
	x := &Extension{log: log, fs: fs, proc: cfg.Proc, runtimes: cfg.Runtimes, emptyCPUs: cfg.EmptyCPUs,
		pods: map[string]*vm{}}
	x.layout, x.layoutErr = cgroups.Detect(cfg.Root)
	if x.layoutErr != nil {
		log.Error("VM sandboxes: no cgroup layout; their pods run without host limits", "root", cfg.Root, "err", x.layoutErr)
	} else {
		log.Info("VM sandboxes", "runtimes", cfg.Runtimes.String(), "root", cfg.Root, "cgroup", x.layout.Version,
			"controllers", x.layout.Controllers(), "emptySandboxCPUs", cfg.EmptyCPUs.String())
	}
	return x
}

// Name names the extension in errors and logs.
func (*Extension) Name() string { return "vm-sandbox" }

// RunPodSandbox sets up a VM sandbox's cgroup with the empty sandbox's limits.
func (x *Extension) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	if !x.runtimes.Match(pod.GetRuntimeHandler()) {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.apply(x.track(pod), "RunPodSandbox")
	return nil
}

// CreateContainer adds the container to its VM sandbox and resizes the sandbox. It never
// adjusts or refuses the container.
func (x *Extension) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container,
	d plan.Decision) (*api.ContainerAdjustment, error) {
	if !x.runtimes.Match(pod.GetRuntimeHandler()) {
		return nil, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.track(pod)
	v.members[ctr.GetName()] = memberOf(ctr, &d) // a new instance replaces a refused or exited one
	x.apply(v, "CreateContainer")
	return nil, nil
}

// StartContainer records the container's process (kept out of the sandbox cgroup) and
// re-checks the sandbox's processes.
func (x *Extension) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	v, ok := x.pods[pod.GetId()]
	if !ok {
		return nil
	}
	if m, ok := v.member(ctr); ok {
		m.pid = int(ctr.GetPid())
		v.members[ctr.GetName()] = m
	}
	x.apply(v, "StartContainer")
	return nil
}

// UpdateContainer takes the container's new limits (res) and resizes its sandbox. A
// quota podfence set (a shared-pool share) stays: the agent keeps it against updates.
func (x *Extension) UpdateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.pods[pod.GetId()]
	m, held := v.member(ctr)
	if !held {
		return nil
	}
	r := resourcesOf(res)
	if !m.podfenceQuota && res.GetCpu().GetQuota() != nil {
		m.Quota, m.Period = r.Quota, r.Period
	}
	if res.GetMemory().GetLimit() != nil {
		m.Memory = r.Memory
	}
	if res.GetPids() != nil {
		m.Pids = r.Pids
	}
	v.members[ctr.GetName()] = m
	x.apply(v, "UpdateContainer")
	return nil
}

// RemoveContainer takes the container out of its sandbox and resizes it.
func (x *Extension) RemoveContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) {
	x.mu.Lock()
	defer x.mu.Unlock()
	v := x.pods[pod.GetId()]
	if _, held := v.member(ctr); !held {
		return
	}
	delete(v.members, ctr.GetName())
	x.apply(v, "RemoveContainer")
}

// RemovePodSandbox removes the sandbox cgroup, moving what is left in it to the parent.
func (x *Extension) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if v, ok := x.pods[pod.GetId()]; ok {
		x.remove(v)
		delete(x.pods, pod.GetId())
	}
}

// Synchronize rebuilds the VM sandboxes from the runtime's pods and live containers,
// adopting their cgroups, and re-applies; cgroups of sandboxes gone meanwhile are removed.
func (x *Extension) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.pods
	x.pods = map[string]*vm{}
	for _, pod := range pods {
		if !x.runtimes.Match(pod.GetRuntimeHandler()) {
			continue
		}
		v := x.track(pod)
		if o, ok := old[pod.GetId()]; ok {
			v.seq, v.cg, v.created, v.failures, v.kept = o.seq, o.cg, o.created, o.failures, o.kept
		}
		for _, ctr := range ctrs {
			if ctr.GetPodSandboxId() == pod.GetId() && ctr.GetState() != api.ContainerState_CONTAINER_STOPPED {
				m := memberOf(ctr, nil)
				m.pid = int(ctr.GetPid())
				v.members[ctr.GetName()] = m
			}
		}
	}
	for id, v := range old {
		if _, ok := x.pods[id]; !ok {
			x.remove(v)
		}
	}
	for _, v := range x.pods {
		x.apply(v, "Synchronize")
	}
	return nil
}

// track returns the pod's sandbox, new if not known; the pod's pid is refreshed.
func (x *Extension) track(pod *api.PodSandbox) *vm {
	v, ok := x.pods[pod.GetId()]
	if !ok {
		v = &vm{id: pod.GetId(), namespace: pod.GetNamespace(), name: pod.GetName(),
			cgroupsPath: pod.GetLinux().GetCgroupsPath(), parent: pod.GetLinux().GetCgroupParent(),
			overhead: resourcesOf(pod.GetLinux().GetPodOverhead()), members: map[string]member{},
			failures: map[string]uint64{}}
		x.seq++
		v.seq = x.seq
		x.pods[v.id] = v
	}
	if pid := int(pod.GetPid()); pid > 0 {
		v.pid = pid
	}
	return v
}

func podName(v *vm) string { return fmt.Sprintf("%s/%s", v.namespace, v.name) }
