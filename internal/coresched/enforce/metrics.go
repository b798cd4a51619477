package enforce

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// metrics are the manager's Prometheus collectors, all named podfence_coresched_*.
type metrics struct {
	supported *prometheus.GaugeVec   // 1 when cookies can be made; reason label otherwise
	watching  prometheus.Gauge       // 1 while the process-event watcher is subscribed
	groups    prometheus.Gauge       // groups with a cookie
	members   *prometheus.GaugeVec   // one series per container and pod sandbox, value 1
	ops       *prometheus.CounterVec // cookie operations by op and result
	repaired  *prometheus.CounterVec // tasks given their cookie after the fact, by who found them
	delay     *prometheus.HistogramVec
	// series holds the group and state labels of each pod/container series set, so that a
	// series is replaced or deleted by its exact labels, never by scanning every series.
	series map[[2]string][2]string
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "podfence", "coresched"
	m := &metrics{
		series: map[[2]string][2]string{},
		supported: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "supported",
			Help: "1 when this node can give containers core-scheduling cookies; else 0, with the reason."},
			[]string{"reason"}),
		watching: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "watcher_up",
			Help: "1 while the process-event watcher (netlink process connector) is subscribed."}),
		groups: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "groups",
			Help: "Core-scheduling groups that have a cookie on this node."}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "container",
			Help: "A container (container=\"\" for the pod sandbox), its group and its cookie state; value 1."},
			[]string{"pod", "container", "group", "state"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "cookie_operations_total",
			Help: "Core-scheduling prctl operations by op (create, share, get) and result."},
			[]string{"op", "result"}),
		repaired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tasks_repaired_total",
			Help: "Tasks in a container's cgroup given the group's cookie after the fact, by who found them (watcher, reconcile)."},
			[]string{"by"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "exec_to_cookie_seconds",
			Help:    "Delay from a process event (exec or fork) in a container's cgroup to the repaired cookie.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14)}, // 50 µs … 0.4 s
			[]string{"event"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.supported, m.watching, m.groups, m.members, m.ops, m.repaired, m.delay} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// setMember replaces the series of member m. The caller holds the manager's lock.
func (x *metrics) setMember(m member) {
	k, v := [2]string{m.Pod, m.Name}, [2]string{m.Group.String(), string(m.State)}
	if old, ok := x.series[k]; ok && old != v {
		x.members.DeleteLabelValues(m.Pod, m.Name, old[0], old[1])
	}
	x.series[k] = v
	x.members.WithLabelValues(m.Pod, m.Name, v[0], v[1]).Set(1)
}

// dropMember deletes the series of m's pod and container. The caller holds the manager's lock.
func (x *metrics) dropMember(m member) {
	k := [2]string{m.Pod, m.Name}
	if old, ok := x.series[k]; ok {
		x.members.DeleteLabelValues(m.Pod, m.Name, old[0], old[1])
		delete(x.series, k)
	}
}

// result names an operation's outcome for the ops metric.
func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, kernel.ErrNoTask):
		return "no_task"
	case errors.Is(err, kernel.ErrNoPermission):
		return "no_permission"
	case errors.Is(err, kernel.ErrNoSchedCore):
		return "no_sched_core"
	case errors.Is(err, kernel.ErrNoSMT):
		return "no_smt"
	}
	return "error"
}

// counted is a Kernel whose calls count into the ops metric.
type counted struct {
	Kernel
	ops *prometheus.CounterVec
}

func (c counted) Create(pid int, scope kernel.Scope) error {
	err := c.Kernel.Create(pid, scope)
	c.ops.WithLabelValues("create", result(err)).Inc()
	return err
}

func (c counted) Share(from, pid int, scope kernel.Scope) error {
	err := c.Kernel.Share(from, pid, scope)
	c.ops.WithLabelValues("share", result(err)).Inc()
	return err
}

// ShareHere is the kernel's ShareHere when it has one, else Share; it counts as a share.
func (c counted) ShareHere(from, pid int, scope kernel.Scope) error {
	h, ok := c.Kernel.(hereSharer)
	if !ok {
		return c.Share(from, pid, scope)
	}
	err := h.ShareHere(from, pid, scope)
	c.ops.WithLabelValues("share", result(err)).Inc()
	return err
}

func (c counted) Get(pid int) (kernel.Cookie, error) {
	v, err := c.Kernel.Get(pid)
	c.ops.WithLabelValues("get", result(err)).Inc()
	return v, err
}

// reason is a short label for why cookies cannot be made.
func reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, kernel.ErrNoSchedCore):
		return "no_sched_core"
	case errors.Is(err, kernel.ErrNoSMT):
		return "no_smt"
	case errors.Is(err, kernel.ErrNoPermission):
		return "no_permission"
	case errors.Is(err, kernel.ErrGroupIdentityOn):
		return "group_identity_on"
	case errors.Is(err, kernel.ErrSchedCoreOff):
		return "sched_core_off"
	case errors.Is(err, errUnreadable):
		return "cookies_unreadable"
	case errors.Is(err, errDisabled):
		return "disabled"
	}
	return "error"
}
