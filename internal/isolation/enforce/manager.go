package enforce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/isolation"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/podapi"
)

// Config says where the kernel's files are. An empty path turns that part off.
type Config struct {
	ProcIRQ   string         // "/proc/irq"
	Workqueue string         // "/sys/devices/virtual/workqueue/cpumask"
	Cgroups   cgroups.Layout // partitions (cgroup v2); the zero Layout: none
	CgroupFS  FS             // nil: cgroups.OS
	// StateDir keeps the record of what the node had before (RecordFile).
	StateDir string
	// Node returns the layout in force (pools and their isolation, online CPUs).
	Node func() *plan.Node
	// Proc is the host's procfs ("/proc"; the agent runs with hostPID), where a running
	// irqbalance is found. Empty: none is looked for.
	Proc string
	// SelfStatus is this process's status file ("/proc/self/status"), whose CapEff says
	// whether the kernel will let it make partitions. Empty: assumed it will.
	SelfStatus string
}

// irqFS is ProcIRQ; tests wrap it.
type irqFS interface {
	IRQs() ([]int, error)
	Affinity(irq int) (cpuset.CPUSet, error)
	Effective(irq int) (cpuset.CPUSet, error)
	SetAffinity(irq int, cpus cpuset.CPUSet) error
	Default() (cpuset.CPUSet, error)
	SetDefault(cpus cpuset.CPUSet) error
}

// Manager keeps device interrupts, the load balancer and unbound kernel work off the
// exclusive CPUs of the containers that want it (package isolation), while they run. It is
// an extension of the agent's NRI plugin: a container is recorded at CreateContainer, its
// CPUs are taken out at StartContainer (its cgroup exists, its entrypoint has not run) and
// given back at StopContainer/RemoveContainer; Synchronize rebuilds everything from the
// running containers, so an agent restarted after a crash leaves the node as they need it.
// The affinity the node had before is on disk (record): given back exactly.
type Manager struct {
	cfg   Config
	log   *slog.Logger
	irq   irqFS
	wq    Workqueue
	parts Partitions

	mu      sync.Mutex
	created map[string]*entry // CreateContainer seen, not started
	running map[string]*entry // started (or found running by Synchronize)
	rec     record
	// applied is what the last apply set: CPUs kept from interrupts and from the
	// workqueues, the cgroups whose cpuset.cpus.exclusive it set.
	applied   applied
	unmovable map[int]string // IRQ -> why, reported once
	irqErr    string         // the last failure to set interrupt affinity ("" when it worked)
	wqErr     string
	balancer  string // a running irqbalance and what it did, for the report ("" when none)
	dirty     bool   // the record changed since it was last written
	disk      record // what was last written
	// restoreIRQ, restoreWQ: the node may hold what a record written before this agent
	// started says was taken out: the first apply gives back what no running container needs.
	restoreIRQ, restoreWQ bool
	written               chan struct{}
}

// entry is one container with exclusive CPUs that wants isolation.
type entry struct {
	held                 isolation.Held
	namespace, pod, name string
	// partition is its cgroup's cpuset.cpus.partition as read after the last apply; why
	// says what it lacks (empty when it has everything asked).
	partition string
	why       []string
}

type applied struct {
	noIRQ, isolated cpuset.CPUSet
}

// New opens the isolation manager: it reads the record of what the node had before, or
// makes one from the node's current state (written now, before any event may change it).
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	m := &Manager{cfg: cfg, log: log, irq: ProcIRQ{Root: cfg.ProcIRQ}, wq: Workqueue{Path: cfg.Workqueue},
		parts: Partitions{Layout: cfg.Cgroups, FS: cfg.CgroupFS,
			NoSysAdmin: cfg.SelfStatus != "" && !hasCapSysAdmin(cfg.SelfStatus)}, created: map[string]*entry{}, running: map[string]*entry{},
		unmovable: map[int]string{}, written: make(chan struct{}, 1)}
	rec, ok, err := loadRecord(cfg.StateDir)
	if err != nil {
		log.Error("isolation record unreadable: the node's current interrupt affinity is taken as it was", "err", err)
	}
	if ok {
		m.rec, m.disk = rec, rec
		m.restoreIRQ, m.restoreWQ = !rec.NoIRQ.IsEmpty(), !rec.Isolated.IsEmpty()
		return m, nil
	}
	m.rec = m.capture()
	if err := saveRecord(cfg.StateDir, m.rec); err != nil {
		return nil, fmt.Errorf("isolation record: %w", err)
	}
	m.disk = m.rec
	return m, nil
}

// capture reads the node's affinity now: what it is when podfence holds nothing.
func (m *Manager) capture() record {
	r := record{IRQs: map[int]cpuset.CPUSet{}, Default: cpuset.New(), Workqueue: cpuset.New()}
	if m.cfg.ProcIRQ != "" {
		irqs, _ := m.irq.IRQs()
		for _, n := range irqs {
			if c, err := m.irq.Affinity(n); err == nil {
				r.IRQs[n] = c
			}
		}
		if d, err := m.irq.Default(); err == nil {
			r.Default = d
		}
	}
	if m.cfg.Workqueue != "" {
		if c, err := m.wq.Get(); err == nil {
			r.Workqueue, r.HasWQ = c, true
		}
	}
	return r
}

func (m *Manager) Name() string { return "isolation" }

// CreateContainer records a container with exclusive CPUs that wants isolation, from its
// pool's choices and its pod's annotations. A pod annotation podfence cannot read, or a
// required isolation this node cannot give, refuses the container.
func (m *Manager) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container, d plan.Decision) (*api.ContainerAdjustment, error) {
	cpus := exclusiveOf(d)
	if cpus.IsEmpty() {
		return nil, nil
	}
	podWant, err := podapi.ParseIsolation(pod.GetAnnotations())
	if err != nil {
		return nil, err
	}
	want := isolation.WantOf(m.poolIsolation(d.Allocation), podWant)
	if !want.Any() {
		return nil, nil
	}
	if want.Required {
		if why := m.cannot(want); len(why) > 0 {
			return nil, fmt.Errorf("isolation required by pool %s, which this node cannot give: %s", d.Allocation.Pool,
				strings.Join(why, "; "))
		}
	}
	e := &entry{held: isolation.Held{ID: ctr.GetId(), CPUs: cpus, Want: want}, namespace: pod.GetNamespace(),
		pod: pod.GetName(), name: ctr.GetName()}
	if p, _, err := cgroups.Path(ctr.GetLinux().GetCgroupsPath()); err == nil {
		e.held.Cgroup = p
	}
	m.mu.Lock()
	m.created[ctr.GetId()] = e
	m.noteLocked() // the writer records the intent before StartContainer takes the CPUs out
	m.mu.Unlock()
	return nil, nil
}

// exclusiveOf returns the exclusive CPUs of a decision (not its share of the shared pool).
func exclusiveOf(d plan.Decision) cpuset.CPUSet {
	if d.Allocation.Type != allocation.TypeExclusive {
		return cpuset.New()
	}
	return d.CPUs.Difference(d.Shared)
}

// poolIsolation is what the pools of an allocation ask, together.
func (m *Manager) poolIsolation(a allocation.Allocation) pools.Isolation {
	var out pools.Isolation
	n := m.node()
	if n == nil {
		return out
	}
	for _, name := range a.ExclusivePools() {
		p, ok := n.Pools.Pool(name)
		if !ok {
			continue
		}
		out = mergeIsolation(out, p.Isolation)
	}
	return out
}

func (m *Manager) node() *plan.Node {
	if m.cfg.Node == nil {
		return nil
	}
	return m.cfg.Node()
}

// cannot lists why this node cannot give want (empty when it can).
func (m *Manager) cannot(want isolation.Want) []string {
	var why []string
	if want.NoIRQs && m.cfg.ProcIRQ == "" {
		why = append(why, "interrupt affinity is not managed here (no /proc/irq given to the agent)")
	}
	if want.NoLoadBalance {
		if ok, reason := m.parts.Support(); !ok {
			why = append(why, "no isolated cpuset partition: "+reason)
		}
	}
	m.mu.Lock()
	if want.NoIRQs && m.irqErr != "" {
		why = append(why, "interrupt affinity cannot be set: "+m.irqErr)
	}
	m.mu.Unlock()
	return why
}

// StartContainer takes the container's CPUs out: its cgroup exists now.
func (m *Manager) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.created[ctr.GetId()]
	if !ok {
		return nil
	}
	delete(m.created, ctr.GetId())
	if p, _, err := cgroups.Path(ctr.GetLinux().GetCgroupsPath()); err == nil {
		e.held.Cgroup = p
	}
	m.running[ctr.GetId()] = e
	return m.applyLocked()
}

// RemoveContainer gives the container's CPUs back (StopContainer and RemoveContainer).
func (m *Manager) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.created, ctr.GetId())
	e, ok := m.running[ctr.GetId()]
	if !ok {
		return
	}
	delete(m.running, ctr.GetId())
	if e.held.Want.NoLoadBalance && e.held.Cgroup != "" && m.cfg.Cgroups.Version == cgroups.V2 {
		// Its partition first, so that its ancestors can let the CPUs go.
		m.logErr("isolation: end of partition", m.parts.SetState(e.held.Cgroup, Member), e)
		m.logErr("isolation: end of partition", m.parts.SetExclusive(e.held.Cgroup, cpuset.New()), e)
	}
	if err := m.applyLocked(); err != nil {
		m.log.Warn("isolation: giving CPUs back", "container", e.name, "pod", e.namespace+"/"+e.pod, "err", err)
	}
}

func (m *Manager) logErr(msg string, err error, e *entry) {
	if err != nil {
		m.log.Warn(msg, "container", e.name, "pod", e.namespace+"/"+e.pod, "err", err)
	}
}

// Synchronize rebuilds the running containers that want isolation from the runtime alone
// (their exclusive CPUs from EXCLUSIVE_CPUS, their pool from the layout in force, their
// pod's annotations) and sets the node as they need it: after an agent restart or a crash,
// interrupts, workqueues and partitions are what the running containers need.
func (m *Manager) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error {
	byID := map[string]*api.PodSandbox{}
	for _, p := range pods {
		byID[p.GetId()] = p
	}
	running := map[string]*entry{}
	for _, c := range ctrs {
		if c.GetState() != api.ContainerState_CONTAINER_RUNNING && c.GetState() != api.ContainerState_CONTAINER_CREATED {
			continue
		}
		pod := byID[c.GetPodSandboxId()]
		if pod == nil {
			continue
		}
		e := m.rebuilt(pod, c)
		if e != nil {
			running[c.GetId()] = e
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running = running
	m.noteLocked()
	return m.applyLocked()
}

// rebuilt is a running container's entry as CreateContainer made it, or nil.
func (m *Manager) rebuilt(pod *api.PodSandbox, c *api.Container) *entry {
	var cpus cpuset.CPUSet
	for _, kv := range c.GetEnv() {
		if v, ok := strings.CutPrefix(kv, plan.EnvExclusiveCPUs+"="); ok {
			parsed, err := topology.ParseCPUList(strings.ReplaceAll(v, " ", ""))
			if err != nil {
				return nil
			}
			cpus = parsed
		}
	}
	if cpus.IsEmpty() {
		return nil
	}
	podWant, err := podapi.ParseIsolation(pod.GetAnnotations())
	if err != nil {
		return nil
	}
	var pi pools.Isolation
	if n := m.node(); n != nil {
		for _, p := range n.Pools.Pools {
			if p.Type == allocation.TypeExclusive && p.CPUs.Intersection(cpus).Size() > 0 {
				pi = mergeIsolation(pi, p.Isolation)
			}
		}
	}
	want := isolation.WantOf(pi, podWant)
	if !want.Any() {
		return nil
	}
	e := &entry{held: isolation.Held{ID: c.GetId(), CPUs: cpus, Want: want}, namespace: pod.GetNamespace(),
		pod: pod.GetName(), name: c.GetName()}
	if p, _, err := cgroups.Path(c.GetLinux().GetCgroupsPath()); err == nil {
		e.held.Cgroup = p
	}
	return e
}

func mergeIsolation(a, b pools.Isolation) pools.Isolation {
	if b.IRQLoadBalancing == pools.Disable {
		a.IRQLoadBalancing = pools.Disable
	}
	if b.CPULoadBalancing == pools.Disable {
		a.CPULoadBalancing = pools.Disable
	}
	if b.Policy == pools.Required {
		a.Policy = pools.Required
	}
	return a
}

// held lists the running containers' wants.
func (m *Manager) heldLocked() []isolation.Held {
	out := make([]isolation.Held, 0, len(m.running))
	for _, e := range m.running {
		out = append(out, e.held)
	}
	return out
}

// online returns the online CPUs of the layout in force, or of the record's default.
func (m *Manager) online() cpuset.CPUSet {
	if n := m.node(); n != nil && n.Topology != nil {
		return n.Topology.Online()
	}
	return m.rec.Default
}

// applyLocked sets interrupts, the workqueue mask and partitions as the running containers
// need them. It writes only what differs and returns what it could not do, joined.
func (m *Manager) applyLocked() error {
	held := m.heldLocked()
	online := m.online()
	var errs []error
	if err := m.durableLocked(held); err != nil {
		return fmt.Errorf("isolation record: %w: nothing taken out", err)
	}
	if m.cfg.ProcIRQ != "" {
		errs = append(errs, m.applyIRQs(online, isolation.NoIRQCPUs(held).Intersection(online)))
	}
	isolated := isolation.IsolatedCPUs(held).Intersection(online)
	if m.cfg.Workqueue != "" {
		errs = append(errs, m.applyWorkqueue(online, isolated))
	}
	if ok, _ := m.parts.Support(); ok {
		errs = append(errs, m.applyPartitions(held))
	}
	m.applied.isolated = isolated
	m.restoreIRQ, m.restoreWQ = false, false
	m.shrinkLocked()
	m.refreshWhy()
	if m.dirty {
		m.kick()
	}
	return errors.Join(errs...)
}

// Release gives back everything podfence took out, as if no container wanted isolation:
// interrupt affinity and the workqueue mask as recorded, partitions back to members, no
// cpuset.cpus.exclusive left; then it removes the record. For an agent that is uninstalled:
// the running containers keep their cpusets, no longer isolated.
func (m *Manager) Release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, e := range m.running {
		if e.held.Want.NoLoadBalance && e.held.Cgroup != "" && m.cfg.Cgroups.Version == cgroups.V2 {
			errs = append(errs, m.parts.SetState(e.held.Cgroup, Member), m.parts.SetExclusive(e.held.Cgroup, cpuset.New()))
		}
	}
	m.running, m.created = map[string]*entry{}, map[string]*entry{}
	m.restoreIRQ, m.restoreWQ = !m.rec.NoIRQ.IsEmpty(), !m.rec.Isolated.IsEmpty()
	errs = append(errs, m.applyLocked())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.dirty = false
	return removeRecord(m.cfg.StateDir)
}
