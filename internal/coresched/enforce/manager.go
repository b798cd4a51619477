package enforce

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// Kernel is the core-scheduling surface the manager uses; kernel.Prctl is the real one.
type Kernel interface {
	Create(pid int, scope kernel.Scope) error
	Share(from, pid int, scope kernel.Scope) error
	Get(pid int) (kernel.Cookie, error)
	Probe() kernel.Support
}

var _ Kernel = kernel.Prctl{}

// Config is the node's core-scheduling setup.
type Config struct {
	// Disabled turns core scheduling off: no kernel calls, and explicit requests are
	// treated as on a node without support.
	Disabled     bool
	DefaultGroup coresched.DefaultGroup
	Policy       coresched.Policy
	// Shared are the groups the operator's profiles share across namespaces; any other
	// labelled group is its namespace's (coresched.GroupFor).
	Shared coresched.SharedGroups
	// QoS are the knobs per Koordinator QoS class (the zero value: the label is not read).
	QoS coresched.QoSRules
	// IdleFS writes cpu.idle; nil means cgroups.OS{}.
	IdleFS CgroupWriter
	// ProcRoot ("/proc") and CgroupRoot ("/sys/fs/cgroup") are the host's trees.
	ProcRoot, CgroupRoot string
	// ReconcileEvery is the period of the cgroup.procs sweep (default 10 s).
	ReconcileEvery time.Duration
	// ReadableWait bounds how long New waits for cookies to read back non-zero, which
	// they do not for a few seconds after boot (default 10 s).
	ReadableWait time.Duration
	// OnRepair, if set, learns of every task given its cookie after the fact.
	OnRepair func(Repair)
}

// Repair is a task that had the wrong cookie and was given its group's.
type Repair struct {
	By        string // "watcher" or "reconcile"
	Member    string // container or pod sandbox ID
	Pid       int
	Scope     kernel.Scope
	Event     string        // watcher: "exec" or "fork"
	Delay     time.Duration // watcher: from the kernel's event to after the fix
	Recovered bool          // reconcile pass run by Synchronize
}

var (
	errUnreadable = errors.New("cookies read back as 0: the kernel's cookie hash key is not set yet")
	errDisabled   = errors.New("core scheduling is turned off on this node")
)

// Manager gives each container's tasks its group's core-scheduling cookie: at
// StartContainer, from a process-event watcher and from a periodic reconcile. It is an
// nri.Extension; Run runs the watcher and the reconcile.
type Manager struct {
	cfg  Config
	k    Kernel
	log  *slog.Logger
	met  *metrics
	proc procFS
	cg   cgroupFS
	self int

	layout  cgroups.Layout // for cpu.idle
	idleErr error          // why this node has no cpu.idle; nil when it has

	mu       sync.Mutex
	book     *book
	unusable error // why no cookies can be made now; nil when they can
	watching bool
	idle     map[string]idleRec    // pod sandboxes whose class asks for cpu.idle, by sandbox ID
	unknown  map[string]unknownRec // pod sandboxes with an unknown Koordinator policy, by sandbox ID
}

// New probes the kernel (unless disabled), runs the Group Identity guard and registers the
// metrics with reg (none when nil).
func New(cfg Config, k Kernel, reg prometheus.Registerer, log *slog.Logger) (*Manager, error) {
	cfg = withDefaults(cfg)
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("core scheduling metrics: %w", err)
	}
	cg, cgErr := detectCgroups(cfg.CgroupRoot)
	m := &Manager{cfg: cfg, k: counted{Kernel: k, ops: met.ops}, log: log, met: met,
		proc: procFS{root: cfg.ProcRoot}, cg: cg, self: os.Getpid(), book: newBook(),
		idle: map[string]idleRec{}, unknown: map[string]unknownRec{}}
	var lerr error
	m.layout, lerr = cgroups.Detect(cfg.CgroupRoot)
	m.idleErr = idleSupport(m.layout, lerr)
	if m.idleErr != nil && cfg.QoS.AnyIdle() {
		log.Warn("cpu.idle unsupported: pods of idle QoS classes run at normal CPU priority", "reason", m.idleErr, "qos", cfg.QoS.String())
	}
	err = cgErr
	if err == nil {
		err = m.check()
	}
	m.setUnusable(err)
	if err != nil {
		log.Warn("core scheduling unavailable: containers run without cookies", "reason", err,
			"policy", cfg.Policy, "explicitGroups", map[coresched.Policy]string{coresched.Strict: "refused",
				coresched.BestEffort: "reported"}[cfg.Policy])
	} else {
		log.Info("core scheduling on", "policy", cfg.Policy, "defaultGroup", cfg.DefaultGroup, "sharedGroups", cfg.Shared.String(),
			"qos", cfg.QoS.String(), "cgroups", cg.String(), "reconcileEvery", cfg.ReconcileEvery)
	}
	return m, nil
}

func withDefaults(c Config) Config {
	if c.DefaultGroup == "" {
		c.DefaultGroup = coresched.ByNamespace
	}
	if c.Policy == "" {
		c.Policy = coresched.Strict
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/sys/fs/cgroup"
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = 10 * time.Second
	}
	if c.ReadableWait == 0 {
		c.ReadableWait = 10 * time.Second
	}
	if c.IdleFS == nil {
		c.IdleFS = cgroups.OS{}
	}
	return c
}

// check finds out whether cookies can be made: probe (waiting for readable cookies), then
// the guard.
func (m *Manager) check() error {
	if m.cfg.Disabled {
		return errDisabled
	}
	s := m.k.Probe()
	for deadline := time.Now().Add(m.cfg.ReadableWait); s.Err == nil && !s.Readable && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		s = m.k.Probe()
	}
	switch {
	case s.Err != nil:
		return fmt.Errorf("probe: %w", s.Err)
	case !s.Readable:
		return fmt.Errorf("probe after %s: %w", m.cfg.ReadableWait, errUnreadable)
	case !s.CapSysPtrace:
		m.log.Warn("core scheduling: no CAP_SYS_PTRACE; cookies of other users' tasks will fail with EPERM")
	}
	return m.guard()
}

// guard runs the Group Identity guard and logs what it changed.
func (m *Manager) guard() error {
	r, err := kernel.Guard(m.cfg.ProcRoot)
	for _, s := range []kernel.Sysctl{r.GroupIdentity, r.SchedCore} {
		if s.Changed() {
			m.log.Warn("core scheduling guard changed a sysctl", "file", s.Path, "from", s.Before, "to", s.After)
		}
	}
	return err
}

func (m *Manager) setUnusable(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setUnusableLocked(err)
}

func (m *Manager) setUnusableLocked(err error) {
	m.unusable = err
	m.met.supported.Reset()
	v := 0.0
	if err == nil {
		v = 1
	}
	m.met.supported.WithLabelValues(reason(err)).Set(v)
}

// stateWithout is the state of a member on a node that cannot make cookies because of err.
func stateWithout(err error) State {
	if errors.Is(err, kernel.ErrGroupIdentityOn) || errors.Is(err, kernel.ErrSchedCoreOff) {
		return StateGuard
	}
	return StateUnsupported
}

// Name names the extension in the agent's logs.
func (m *Manager) Name() string { return "coresched" }

// Status is the manager's state for logs and `podfence status`.
type Status struct {
	Err      error // why cookies cannot be made; nil when they can
	Watching bool  // the process-event watcher is subscribed
	Groups   int   // groups with a cookie
	Members  int   // containers and pod sandboxes known
}

// Status reports the manager's state.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Status{Err: m.unusable, Watching: m.watching, Groups: len(m.book.groups), Members: len(m.book.members)}
}
