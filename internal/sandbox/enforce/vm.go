package enforce

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
)

// vm is a VM sandbox the extension holds.
type vm struct {
	id, namespace, name string
	seq                 uint64 // order of first sight: a pod's re-created sandbox is newer
	pid                 int    // the sandbox's pid (NRI PodSandbox.Pid): the anchor of its processes
	lost                bool   // the last update found no process with that pid
	cgroupsPath, parent string // the sandbox's cgroups path and the pod's cgroup parent
	overhead            sandbox.Resources
	members             map[string]member // live containers by name

	cg       *host.Cgroup // nil until created
	created  []string     // directories Create made
	want     *sandbox.Limits
	applied  host.Applied
	placed   host.Placement
	ok       bool              // the last apply succeeded in every step
	kept     uint64            // applies that kept the memory limit above usage
	failed   []string          // steps that failed in the last apply
	failures map[string]uint64 // failed applies by step: cgroup, limits, processes
}

// member is a live container of a sandbox.
type member struct {
	sandbox.Member
	id            string // the container instance
	pid           int    // its process, kept out of the sandbox cgroup
	cgroup        string // its cgroup path, whose processes are kept out too
	podfenceQuota bool   // the quota is podfence's (a shared-pool share)
}

// member returns ctr's entry in v, if v holds that instance (a nil v holds none).
func (v *vm) member(ctr *api.Container) (member, bool) {
	if v == nil {
		return member{}, false
	}
	m, ok := v.members[ctr.GetName()]
	return m, ok && m.id == ctr.GetId()
}

// memberOf describes a container: its effective limits and cpuset are podfence's decision
// d where d sets them, else what the runtime reports (at Synchronize, these hold
// podfence's adjustments already).
func memberOf(ctr *api.Container, d *plan.Decision) member {
	res := ctr.GetLinux().GetResources()
	m := member{Member: sandbox.Member{Resources: resourcesOf(res)}, id: ctr.GetId()}
	if d != nil && d.Quota > 0 {
		m.Quota, m.Period, m.podfenceQuota = d.Quota, d.Period, true
	}
	if d != nil && !d.CPUs.IsEmpty() {
		m.CPUs, m.Mems = d.CPUs, d.Mems
	} else {
		m.CPUs, _ = topology.ParseCPUList(res.GetCpu().GetCpus())
		m.Mems, _ = topology.ParseCPUList(res.GetCpu().GetMems())
	}
	if p, _, err := cgroups.Path(ctr.GetLinux().GetCgroupsPath()); err == nil {
		m.cgroup = p
	}
	return m
}

// resourcesOf reads the CFS quota, memory and pids limits of NRI resources (a container's,
// or the pod's overhead).
func resourcesOf(r *api.LinuxResources) sandbox.Resources {
	return sandbox.Resources{
		Quota:  r.GetCpu().GetQuota().GetValue(),
		Period: int64(min(r.GetCpu().GetPeriod().GetValue(), 1<<62)),
		Memory: r.GetMemory().GetLimit().GetValue(),
		Pids:   r.GetPids().GetLimit(),
	}
}

// apply brings v's cgroup in line with its pod; failures are logged and counted.
func (x *Extension) apply(v *vm, event string) {
	log := x.log.With("pod", podName(v), "event", event)
	failed := map[string]error{}
	x.enforce(v, log, failed)
	v.failed = v.failed[:0]
	for step, err := range failed {
		v.failures[step]++
		v.failed = append(v.failed, step)
		log.Warn("VM sandbox cgroup not fully in force", "step", step, "cgroup", cgroupPath(v), "err", err)
	}
	slices.Sort(v.failed)
	v.ok = len(failed) == 0
}

// enforce creates or adopts v's cgroup, sets its limits if they changed (or memory was
// kept), and places its processes. Failures go to failed by step.
func (x *Extension) enforce(v *vm, log *slog.Logger, failed map[string]error) {
	if x.layoutErr != nil {
		failed["cgroup"] = x.layoutErr
		return
	}
	if v.cg == nil {
		path, err := host.PathFor(v.id, v.cgroupsPath, v.parent)
		var cg *host.Cgroup
		if err == nil {
			cg, err = host.Open(x.fs, x.layout, path)
		}
		if err == nil {
			v.created, err = cg.Create()
		}
		if err != nil {
			failed["cgroup"] = fmt.Errorf("create the sandbox cgroup: %w", err)
			return
		}
		v.cg = cg
		log.Info("VM sandbox cgroup", "cgroup", path, "adopted", len(v.created) == 0, "pid", v.pid)
	}
	ms := make([]sandbox.Member, 0, len(v.members))
	for _, m := range v.members {
		ms = append(ms, m.Member)
	}
	limits := sandbox.Size(v.overhead, ms, x.emptyCPUs)
	if v.want == nil || !v.want.Equal(limits) || v.applied.MemoryKept {
		a, err := v.cg.Set(limits)
		v.want, v.applied = &limits, a
		if err != nil {
			v.want = nil // try again at the next event
			failed["limits"] = fmt.Errorf("set the limits: %w", err)
		}
		log.Info("VM sandbox limits", "cgroup", v.cg.Path(), "containers", len(v.members), "cpus", a.CPUs.String(),
			"mems", a.Mems.String(), "quota", a.Quota, "period", sandbox.Period, "memory", a.Memory, "pids", a.Pids)
		if a.MemoryKept {
			v.kept++
			log.Warn("VM sandbox memory limit kept: the sandbox uses more than its containers' limits and overhead",
				"cgroup", v.cg.Path(), "want", limits.Memory, "usage", a.Usage, "kept", a.Memory)
		}
	}
	if err := x.place(v, log); err != nil {
		failed["processes"] = err
	}
}

// place moves v's processes into its cgroup.
func (x *Extension) place(v *vm, log *slog.Logger) error {
	table, err := host.ReadProcs(x.proc)
	if err != nil {
		return err
	}
	if _, err := sandbox.Root(table, v.pid); err != nil {
		v.lost = true
		return err
	}
	pids, cgs := map[int]bool{}, map[string]bool{}
	for _, m := range v.members {
		if m.pid > 0 && m.pid != v.pid { // Kata reports the hypervisor's pid for containers too
			pids[m.pid] = true
		}
		if m.cgroup != "" {
			cgs[m.cgroup] = true
		}
	}
	members := sandbox.Members(table, v.pid, func(p sandbox.Proc) bool {
		if pids[p.PID] {
			return true
		}
		cg, err := v.cg.CgroupOf(x.proc, p.PID)
		return err == nil && cgs[cg]
	})
	v.lost = members == nil
	if v.lost { // gone between Root and here: the same table, so never
		return fmt.Errorf("the sandbox's process %d is gone", v.pid)
	}
	p, err := v.cg.Place(x.proc, members)
	v.placed = p
	if p.Moved > 0 {
		log.Info("VM sandbox processes placed", "cgroup", v.cg.Path(), "pids", members, "threads", p.Threads, "moved", p.Moved)
	}
	if err != nil {
		return fmt.Errorf("move the sandbox's processes: %w", err)
	}
	return nil
}

// remove removes v's cgroup.
func (x *Extension) remove(v *vm) {
	if v.cg == nil {
		return
	}
	moved, err := v.cg.Remove(v.created)
	log := x.log.With("pod", podName(v), "event", "RemovePodSandbox")
	if err != nil {
		x.removeFailures++
		log.Warn("VM sandbox cgroup not removed", "cgroup", v.cg.Path(), "err", err)
		return
	}
	log.Info("VM sandbox cgroup removed", "cgroup", v.cg.Path(), "stragglersMoved", moved)
}

func cgroupPath(v *vm) string {
	if v.cg == nil {
		return ""
	}
	return v.cg.Path()
}
