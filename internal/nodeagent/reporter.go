package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/events"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/observe/status"
	"github.com/podfence/podfence/internal/observe/status/probe"
	"github.com/podfence/podfence/podapi"
)

// degradedEvery is how often the extensions' degraded containers are looked at for Events.
const degradedEvery = 5 * time.Second

// reporter is the agent's operator surface: the node report (/state, /readyz), the pool metrics,
// refusals counted, and Kubernetes Events on pods for refusals and degraded enforcement. It
// rides on the agent as an extension to observe refusals.
type reporter struct {
	cfg      Config
	log      *slog.Logger
	reg      prometheus.Registerer
	kernel   status.Kernel
	rec      recorder // nil: no Events
	refusals *prometheus.CounterVec
	seen     map[string]bool // degraded containers already reported, by pod UID/container/reason
	// pendingSeen is the pending pool config last reported as an Event ("" for none).
	pendingSeen string
	// offlineSeen is the offline pool CPUs last reported as an Event ("" for none).
	offlineSeen string
}

var _ nriplugin.RefusalObserver = (*reporter)(nil)

// recorder is what reporter needs of *events.Recorder.
type recorder interface {
	Record(events.Event)
	Run(context.Context)
}

// newReporter probes the kernel features once and, if cfg.Events, posts Events through api
// (apiClient; nil: no Events).
func newReporter(cfg Config, node *plan.Node, reg prometheus.Registerer, api *kubeapi.Client, log *slog.Logger) (*reporter, error) {
	o := &reporter{cfg: cfg, log: log, reg: reg, seen: map[string]bool{},
		kernel: probe.Kernel(probe.Config{Sysfs: cfg.Sysfs, ThreadsPerCore: node.Topology.ThreadsPerCore(),
			CgroupRoot: cfg.CgroupRoot, CoreSched: kernel.Prctl{}.Probe()}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podfence_refused_containers_total",
			Help: "Containers the agent refused at CreateContainer, by reason (a plan refusal code such as NotEnoughCPUs, " +
				"InvalidAnnotation, DRAClaim, EPCUnsupported, CoreSchedulingUnavailable, or Refused)."}, []string{"reason"})}
	if err := reg.Register(o.refusals); err != nil {
		return nil, fmt.Errorf("register refusal metrics: %w", err)
	}
	if !cfg.Events || api == nil {
		return o, nil
	}
	rec := events.New(events.NewClient(api, userAgent, cfg.NodeName), events.Options{}, log.With("component", "events"))
	if err := reg.Register(rec.Collector()); err != nil {
		return nil, fmt.Errorf("register event metrics: %w", err)
	}
	o.rec = rec
	return o, nil
}

func (*reporter) Name() string { return "report" }

// Refused counts a refusal and queues its Event; it never blocks.
func (o *reporter) Refused(pod *api.PodSandbox, ctr *api.Container, err error) {
	reason := refusalReason(err)
	o.refusals.WithLabelValues(reason).Inc()
	if o.rec != nil {
		o.rec.Record(events.Event{Namespace: pod.GetNamespace(), Pod: pod.GetName(), PodUID: pod.GetUid(),
			Container: ctr.GetName(), Type: events.Warning, Reason: reason, Message: err.Error()})
	}
}

// refusalReason names why a container was refused, for the metric and the Event.
func refusalReason(err error) string {
	var r *plan.Refusal
	var ae *podapi.AnnotationError
	var ce *nriplugin.ClaimError
	switch {
	case errors.As(err, &r):
		return r.Code
	case errors.As(err, &ae):
		return "InvalidAnnotation"
	case errors.As(err, &ce):
		return "DRAClaim"
	case errors.Is(err, epc.ErrUnsupported):
		return "EPCUnsupported"
	case errors.Is(err, kernel.ErrNoSchedCore), errors.Is(err, kernel.ErrNoSMT):
		return "CoreSchedulingUnavailable"
	}
	return "Refused"
}

// attach registers the pool metrics of a and returns the endpoints that serve its report.
func (o *reporter) attach(a *nriplugin.Plugin) ([]metrics.Option, error) {
	if err := o.reg.Register(status.Collector(a)); err != nil {
		return nil, fmt.Errorf("register pool metrics: %w", err)
	}
	blocking := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "podfence_pool_config_pending_blocking_containers",
		Help: "Running containers that keep a changed pool config from being taken (they would have to move); " +
			"-1 when no config is pending."}, func() float64 {
		if p, ok := a.PendingReload(); ok {
			return float64(len(p.Blocking))
		}
		return -1
	})
	if err := o.reg.Register(blocking); err != nil {
		return nil, fmt.Errorf("register pool config metric: %w", err)
	}
	return []metrics.Option{
		metrics.WithReady(func() error {
			if !a.Ready() {
				return errors.New("the container runtime has not synchronised the agent yet")
			}
			return nil
		}),
		metrics.WithState(func() any { return o.report(a) }),
	}, nil
}

// report is the node report of a now.
func (o *reporter) report(a *nriplugin.Plugin) status.Report {
	node, allocs := a.Snapshot()
	r := status.Build(node, allocs, a.ExtensionStates())
	r.Node, r.Source, r.Time, r.Ready, r.Kernel = o.cfg.NodeName, "agent", time.Now(), a.Ready(), o.kernel
	r.PendingPoolConfig = pendingReport(a)
	return r
}

// pendingReport is the agent's pending pool config for the report; nil when none.
func pendingReport(a *nriplugin.Plugin) *status.PendingPoolConfig {
	p, ok := a.PendingReload()
	if !ok {
		return nil
	}
	return &p
}

// degradedPools records a Warning Event on the node each time the set of offline pool
// CPUs changes to a non-empty one.
func (o *reporter) degradedPools(a *nriplugin.Plugin) {
	off := a.Node().Pools.Offline
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(off)) {
		parts = append(parts, fmt.Sprintf("pool %s: CPUs %s", name, off[name]))
	}
	key := strings.Join(parts, "; ")
	if key == o.offlineSeen {
		return
	}
	o.offlineSeen = key
	if key != "" {
		o.rec.Record(events.Event{Node: o.cfg.NodeName, Type: events.Warning, Reason: "PoolDegraded",
			Message: "pools run degraded, CPUs offline: " + key + "; none of them is handed out until online again"})
	}
}

// pending records one Warning Event on the node for each pool config that becomes pending.
func (o *reporter) pending(a *nriplugin.Plugin) {
	p := pendingReport(a)
	if p == nil {
		o.pendingSeen = ""
		return
	}
	key := p.Source + "@" + p.Since.String()
	if key == o.pendingSeen {
		return
	}
	o.pendingSeen = key
	var who []string
	for _, b := range p.Blocking {
		who = append(who, fmt.Sprintf("%s/%s %s (%s)", b.Namespace, b.Pod, b.Container, b.Reason))
	}
	o.rec.Record(events.Event{Node: o.cfg.NodeName, Type: events.Warning, Reason: "PoolConfigPending",
		Message: fmt.Sprintf("pool config %s waits for %d running container(s) that would have to move: %s",
			p.Source, len(p.Blocking), strings.Join(who, "; "))})
}

// run posts Events and looks for degraded containers until ctx ends.
func (o *reporter) run(ctx context.Context, a *nriplugin.Plugin) {
	if o.rec == nil {
		return
	}
	go o.rec.Run(ctx)
	t := time.NewTicker(degradedEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			o.degraded(a)
			o.pending(a)
			o.degradedPools(a)
		}
	}
}

// degraded records an Event for each degraded container not reported yet, and forgets
// those no longer degraded.
func (o *reporter) degraded(a *nriplugin.Plugin) {
	_, allocs := a.Snapshot()
	uids := map[string]string{}
	for _, al := range allocs {
		uids[al.Namespace+"/"+al.Pod] = al.PodUID
	}
	now := map[string]bool{}
	for _, d := range a.Degraded() {
		uid := uids[d.Namespace+"/"+d.Pod]
		k := uid + "/" + d.Namespace + "/" + d.Pod + "/" + d.Container + "/" + d.Reason
		now[k] = true
		if !o.seen[k] {
			o.rec.Record(events.Event{Namespace: d.Namespace, Pod: d.Pod, PodUID: uid, Container: d.Container,
				Type: events.Warning, Reason: d.Reason, Message: d.Message})
		}
	}
	o.seen = now
}
