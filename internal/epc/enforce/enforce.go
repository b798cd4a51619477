// Package enforce puts SGX EPC limits (package epc) on containers as an extension of the
// NRI agent (nriplugin.Extension), and reports EPC use per container to Prometheus (Collector).
//
// New probes the node once: the cgroup layout and whether misc.capacity lists sgx_epc
// (Probe). Then, per container:
//
//   - CreateContainer resolves the limit from the pod's annotations and plans it (epc.Plan).
//     On cgroup v2 the limit joins the adjustment as the unified resource misc.max, which the
//     runtime writes when it creates the container's cgroup. On cgroup v1 the extension
//     creates the container's misc cgroup at the path the runtime will use and writes
//     misc.max there at once. A limit the node cannot enforce refuses the container (strict)
//     or is logged and counted (best-effort). A misc.max already in the container's unified
//     resources (an NRI plugin that ran earlier, such as nri-plugins sgx-epc) is left to its
//     owner: nothing is set, the container is logged once and counted as yielded. With
//     ApplyAt start (v2) nothing is claimed here: StartContainer writes the cap, for nodes
//     where such a plugin runs after the agent (NRI fails a container two plugins set
//     misc.max for).
//   - StartContainer checks that the cap is in force; see below.
//   - RemoveContainer, RemovePodSandbox forget the container and remove the cgroups the
//     extension created, if the runtime has not. Synchronize rebuilds from the runtime.
//
// Timing on cgroup v1, and why there is no window: NRI's CreateContainer comes before the
// runtime creates the container's cgroups (containerd runs runc create at CRI
// StartContainer; CRI-O right after NRI). runc makes each v1 cgroup with mkdir -p and
// joins the misc hierarchy as well (it lists misc among the v1 hierarchies it joins), so it
// uses the cgroup made ahead, with misc.max already set when the container's first process
// enters it. Writing at StartContainer instead would still precede the entrypoint, but a
// failure there can only be logged, while at CreateContainer it refuses the container with
// its reason. StartContainer then reads misc.max back and, on v1, looks for the container's
// pid in the cgroup; a path changed by a later plugin gets the cap written there (the
// entrypoint still waits). A cap not in force is logged and counted as unenforced.
package enforce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// Cgroupfs is the kernel edge the extension works through; cgroups.OS is the real one.
type Cgroupfs interface {
	Mkdir(dir string) (created []string, err error)
	Rmdir(dir string) error
	Read(dir, name string) ([]byte, error)
	Write(dir, name, value string) error
}

var (
	_ Cgroupfs                   = cgroups.OS{}
	_ nriplugin.ContainerCreator = (*Extension)(nil)
	_ nriplugin.ContainerStarter = (*Extension)(nil)
	_ nriplugin.ContainerRemover = (*Extension)(nil)
	_ nriplugin.PodRemover       = (*Extension)(nil)
	_ nriplugin.Synchronizer     = (*Extension)(nil)
)

// Config is what the extension needs.
type Config struct {
	// Root is the cgroupfs mount point ("/sys/fs/cgroup").
	Root   string
	Policy epc.Policy
	// ApplyAt is when a cap is set on cgroup v2 (epc.AtCreate, the zero value, or AtStart).
	ApplyAt epc.ApplyAt
	// FS is the cgroupfs; nil means cgroups.OS{}.
	FS Cgroupfs
}

// Extension is the EPC limit extension. Create it with New.
type Extension struct {
	fs     Cgroupfs
	log    *slog.Logger
	policy epc.Policy
	at     epc.ApplyAt
	cap    Capability

	// mu guards everything below.
	mu      sync.Mutex
	ctrs    map[string]*entry // by container ID
	seq     uint64            // creation order of entries
	refused map[string]uint64 // refusals by reason
	readErr uint64            // failed reads during scrapes
}

// entry is a container the extension tracks: one with a limit, and on a node that can
// enforce limits every container, for telemetry.
type entry struct {
	seq        uint64
	podID      string
	namespace  string
	pod        string
	container  string
	dir        string // misc cgroup directory; "" if unknown
	limit      epc.Limit
	mode       epc.Mode // how the limit is applied
	yielded    string   // mode Yielded: the misc.max its owner set
	started    bool     // mode ViaStart: StartContainer has run
	inForce    bool     // the limit is set and in force
	created    []string // cgroups the extension made, outermost first
	unresolved error    // why dir is unknown
}

// New probes the node at cfg.Root and logs what it found.
func New(cfg Config, log *slog.Logger) *Extension {
	fs := cfg.FS
	if fs == nil {
		fs = cgroups.OS{}
	}
	x := &Extension{fs: fs, log: log, policy: cfg.Policy, at: cfg.ApplyAt, cap: Probe(fs, cfg.Root),
		ctrs: map[string]*entry{}, refused: map[string]uint64{}}
	attrs := []any{"root", cfg.Root, "cgroup", x.cap.Layout.Version, "misc", x.cap.MiscRoot,
		"sgxEPC", x.cap.Node.Supported, "policy", x.policy, "applyAt", x.at}
	if x.cap.Node.Supported {
		log.Info("epc probe", append(attrs, "capacity", x.cap.Capacity)...)
	} else {
		log.Warn("epc probe: SGX EPC limits cannot be enforced", append(attrs, "reason", x.cap.Node.Reason)...)
	}
	return x
}

// Name names the extension in errors and logs.
func (*Extension) Name() string { return "epc" }

// Capability returns what the probe found.
func (x *Extension) Capability() Capability { return x.cap }

// CreateContainer applies the container's limit: a unified misc.max (cgroup v2), a write to
// its misc cgroup (v1), or nothing yet (v2, ApplyAt start). It stands aside when misc.max is
// already in the container's unified resources (an earlier NRI plugin such as nri-plugins
// sgx-epc, or the runtime): that owner caps the container. An error refuses the container.
func (x *Extension) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container,
	_ plan.Decision) (*api.ContainerAdjustment, error) {
	limit, key, err := epc.Resolve(pod.GetAnnotations(), ctr.GetName())
	if err != nil {
		return nil, x.refuse("annotation", err)
	}
	unified := ctr.GetLinux().GetResources().GetUnified()
	mode, err := epc.Plan(limit, x.cap.Node, x.policy, x.at, unified)
	if err != nil { // the node lacks support (strict)
		return nil, x.refuse("unsupported", fmt.Errorf("SGX EPC limit %s bytes (annotation %s): %w", limit, key, err))
	}
	if mode == epc.None && !x.cap.Node.Supported {
		return nil, nil // nothing to enforce, nothing to measure
	}
	e := x.newEntry(pod, ctr, limit)
	e.mode = mode
	var adj *api.ContainerAdjustment
	switch mode {
	case epc.ViaUnified:
		adj = &api.ContainerAdjustment{}
		adj.AddLinuxUnified(epc.UnifiedKey, limit.MiscMax())
	case epc.ViaWrite:
		if err := x.write(e); err != nil {
			return nil, x.refuse("cgroup", fmt.Errorf("SGX EPC limit %s bytes (annotation %s): %w", limit, key, err))
		}
	case epc.Yielded:
		e.yielded, _ = epc.SetBy(unified)
		e.inForce = e.yielded == limit.MiscMax()
	}
	if mode == epc.ViaUnified || mode == epc.ViaWrite {
		e.inForce = true
	}
	x.mu.Lock()
	x.ctrs[ctr.GetId()] = e
	x.mu.Unlock()
	switch {
	case mode == epc.Unenforced:
		x.log.Warn("SGX EPC limit not enforced", "pod", podName(pod), "container", ctr.GetName(), "limit", limit,
			"annotation", key, "policy", x.policy, "reason", x.cap.Node.Reason)
	case mode == epc.Yielded:
		x.logYield(pod, ctr, e, "an NRI plugin that ran earlier, or the runtime")
	case limit.IsSet():
		x.log.Info("SGX EPC limit", "pod", podName(pod), "container", ctr.GetName(), "limit", limit,
			"annotation", key, "via", mode, "cgroup", e.dir)
	}
	return adj, nil
}

// logYield logs, once for the container, that its misc.max is someone else's.
func (x *Extension) logYield(pod *api.PodSandbox, ctr *api.Container, e *entry, by string) {
	x.log.Info("SGX EPC limit left to another owner of misc.max", "pod", podName(pod), "container", ctr.GetName(),
		"setBy", by, "value", e.yielded, "limit", e.limit, "same", e.inForce)
}

// unenforced reports whether e's limit is podfence's to enforce and is not in force: not a
// cap left to another owner of misc.max, nor one waiting for StartContainer.
func (e *entry) unenforced() bool {
	return e.limit.IsSet() && !e.inForce && e.mode != epc.Yielded && (e.mode != epc.ViaStart || e.started)
}

// write creates e's misc cgroup (cgroup v1) and sets its cap, undoing the creation if the
// write fails.
func (x *Extension) write(e *entry) error {
	if e.unresolved != nil {
		return fmt.Errorf("find the container's misc cgroup: %w", e.unresolved)
	}
	created, err := x.fs.Mkdir(e.dir)
	if err == nil {
		err = x.fs.Write(e.dir, epc.UnifiedKey, e.limit.MiscMax())
	}
	if err != nil {
		x.removeDirs(created)
		return fmt.Errorf("set it in the container's misc cgroup: %w", err)
	}
	e.created = created
	return nil
}

// refuse counts a refusal for reason and returns err.
func (x *Extension) refuse(reason string, err error) error {
	x.mu.Lock()
	x.refused[reason]++
	x.mu.Unlock()
	return err
}

// newEntry describes ctr, finding its misc cgroup from its cgroups path.
func (x *Extension) newEntry(pod *api.PodSandbox, ctr *api.Container, limit epc.Limit) *entry {
	e := &entry{podID: pod.GetId(), namespace: pod.GetNamespace(), pod: pod.GetName(), container: ctr.GetName(), limit: limit}
	e.dir, e.unresolved = x.dirOf(ctr)
	x.mu.Lock()
	x.seq++
	e.seq = x.seq
	x.mu.Unlock()
	return e
}

// dirOf returns the directory of ctr's misc cgroup.
func (x *Extension) dirOf(ctr *api.Container) (string, error) {
	if x.cap.MiscRoot == "" {
		return "", errors.New("no misc controller")
	}
	p, _, err := cgroups.Path(ctr.GetLinux().GetCgroupsPath())
	if err != nil {
		return "", err
	}
	return x.cap.Layout.Dir("misc", p)
}

// removeDirs removes cgroups made by the extension, innermost first. One the runtime
// removed already, or still uses, is left alone.
func (x *Extension) removeDirs(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := x.fs.Rmdir(dirs[i]); err != nil && !cgroups.Gone(err) {
			x.log.Debug("cgroup left in place", "dir", dirs[i], "err", err)
			return
		}
	}
}

func podName(pod *api.PodSandbox) string { return pod.GetNamespace() + "/" + pod.GetName() }
