// Package events posts Kubernetes Events on pods for what operators must see without reading
// the agent's log: containers the agent refused, and containers that run with less isolation
// than asked (degraded enforcement under a best-effort policy). `kubectl describe pod` shows
// them.
//
// Recording never blocks: Record puts the event on a bounded queue (dropped and counted when
// full) that Run drains in its own goroutine. Run applies two token buckets (rate.Limiter)
// before it posts, one per pod and reason and one for the whole agent, so a crash-looping
// pod or a node-wide failure cannot flood the API server; what they hold back is counted,
// not queued.
//
// Events go to the API server with a plain REST call (Client): POST
// /api/v1/namespaces/<namespace>/events through a kubeapi.Client, with the service
// account's bearer token or the credentials of a kubeconfig (kubeapi.Load).
package events

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Event is one event on a pod.
type Event struct {
	// Node, if set, makes the event about this Node (cluster-scoped, recorded in namespace
	// default) rather than a pod.
	Node                   string
	Namespace, Pod, PodUID string
	// Container, if set, names the container the event is about (involvedObject.fieldPath).
	Container string
	// Type is "Warning" or "Normal".
	Type string
	// Reason is short and CamelCase ("NotEnoughCPUs"); Message is for people.
	Reason, Message string
}

// Event types.
const (
	Warning = "Warning"
	Normal  = "Normal"
)

// Sink is where events go: the API server (*Client), or a fake in tests.
type Sink interface {
	Post(ctx context.Context, e Event, at time.Time) error
}

// Options tune a Recorder; zero fields take the defaults.
type Options struct {
	// Queue is how many events may wait to be posted (256).
	Queue int
	// PerPodBurst events per pod and reason pass at once, then one per PerPodEvery
	// (3, one a minute).
	PerPodBurst int
	PerPodEvery time.Duration
	// Burst events pass at once for the whole agent, then one per Every (20, one a second).
	Burst int
	Every time.Duration
	// Timeout bounds one post (5 s).
	Timeout time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Queue, 256)
	def(&o.PerPodBurst, 3)
	defDur(&o.PerPodEvery, time.Minute)
	def(&o.Burst, 20)
	defDur(&o.Every, time.Second)
	defDur(&o.Timeout, 5*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Recorder queues events and posts them from Run. Create it with New.
type Recorder struct {
	sink  Sink
	opts  Options
	log   *slog.Logger
	queue chan Event
	count *prometheus.CounterVec
}

// Results counted in podfence_events_total.
const (
	ResultSent        = "sent"
	ResultRateLimited = "rate_limited"
	ResultQueueFull   = "queue_full"
	ResultFailed      = "failed"
)

// New returns a recorder that posts to sink once Run runs.
func New(sink Sink, opts Options, log *slog.Logger) *Recorder {
	opts = opts.withDefaults()
	r := &Recorder{sink: sink, opts: opts, log: log, queue: make(chan Event, opts.Queue),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podfence_events_total",
			Help: "Kubernetes Events on pods by result: sent, rate_limited, queue_full (dropped at once), failed (the API said no)."},
			[]string{"result"})}
	for _, res := range []string{ResultSent, ResultRateLimited, ResultQueueFull, ResultFailed} {
		r.count.WithLabelValues(res)
	}
	return r
}

// Collector reports podfence_events_total.
func (r *Recorder) Collector() prometheus.Collector { return r.count }

// Record queues e without blocking; a full queue drops it.
func (r *Recorder) Record(e Event) {
	select {
	case r.queue <- e:
	default:
		r.count.WithLabelValues(ResultQueueFull).Inc()
	}
}

// Run posts queued events until ctx ends. Events still queued then are dropped.
func (r *Recorder) Run(ctx context.Context) {
	perPod := newLimiter(r.opts.PerPodBurst, r.opts.PerPodEvery, 4096)
	global := rate.NewLimiter(rate.Every(r.opts.Every), r.opts.Burst)
	failing := false
	for {
		var e Event
		select {
		case <-ctx.Done():
			return
		case e = <-r.queue:
		}
		now := r.opts.Now()
		if !allow(perPod, global, e.Namespace+"/"+e.Pod+"/"+e.PodUID+"/"+e.Reason, now) {
			r.count.WithLabelValues(ResultRateLimited).Inc()
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
		err := r.sink.Post(pctx, e, now)
		cancel()
		switch {
		case err == nil:
			r.count.WithLabelValues(ResultSent).Inc()
			if failing {
				r.log.Info("posting Kubernetes Events again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		default:
			r.count.WithLabelValues(ResultFailed).Inc()
			level := slog.LevelDebug
			if !failing {
				level = slog.LevelWarn // once per run of failures
			}
			failing = true
			r.log.Log(ctx, level, "cannot post Kubernetes Event", "pod", e.Namespace+"/"+e.Pod, "reason", e.Reason, "err", err)
		}
	}
}
