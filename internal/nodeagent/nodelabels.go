package nodeagent

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/podfence/podfence/internal/kube/kubeapi"
)

// How long Run waits at start for the first read of the Node's labels: without a layout in
// force (the first start on a node), and with one (a restart, which can serve at once).
const (
	labelStartWait        = 30 * time.Second
	labelStartWaitInForce = 2 * time.Second
)

// nodeLabels keeps the labels of the agent's Node as the API server has them: read with a
// GET, then kept by a single-object watch (RBAC: get and watch on nodes), or by a GET every
// pollEvery where RBAC forbids the watch. Failed reads are retried with backoff (minRetry
// doubling to maxRetry) for as long as the agent runs. Nothing waits on it but Run's start
// (wait); the pool config watch reads current and wakes on changed.
type nodeLabels struct {
	api                *kubeapi.Client
	node               string
	pollEvery          time.Duration
	minRetry, maxRetry time.Duration // backoff after a failed read
	watchTimeout       time.Duration // the server ends each watch after this
	log                *slog.Logger

	mu      sync.Mutex
	labels  map[string]string
	known   bool
	lastErr error
	settled chan struct{} // closed at the first read, or the first refusal (see failed)
	once    sync.Once
	changed chan struct{} // capacity 1: the labels changed since the last receive
}

// newNodeLabels returns the watcher of cfg.NodeName's labels when they come from the API
// server: no --node-label given, a node name, and a client. Otherwise nil (cfg.NodeLabels
// and the hostname label select the config).
func newNodeLabels(cfg Config, api *kubeapi.Client, log *slog.Logger) *nodeLabels {
	if !labelsFromAPI(cfg) || api == nil {
		return nil
	}
	poll := cfg.PoolsReloadInterval
	if poll <= 0 {
		poll = time.Minute
	}
	return &nodeLabels{api: api, node: cfg.NodeName, pollEvery: poll, minRetry: 500 * time.Millisecond, maxRetry: 30 * time.Second,
		watchTimeout: 5 * time.Minute, log: log.With("component", "nodelabels"), settled: make(chan struct{}),
		changed: make(chan struct{}, 1)}
}

// labelsFromAPI says whether the agent reads its Node's labels from the API server.
func labelsFromAPI(cfg Config) bool { return len(cfg.NodeLabels) == 0 && cfg.NodeName != "" }

// current returns a copy of the labels last read, and whether any read succeeded yet (false
// on a nil l).
func (l *nodeLabels) current() (map[string]string, bool) {
	if l == nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.labels), l.known
}

// lastError is the error of the last failed read (nil after a success).
func (l *nodeLabels) lastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

// wait waits up to d for the first read, or for the API server to refuse one; it reports
// whether the labels are known.
func (l *nodeLabels) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.settled:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	_, known := l.current()
	return known
}

// set records labels read from the API server.
func (l *nodeLabels) set(labels map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = nil
	if l.known && maps.Equal(l.labels, labels) {
		return
	}
	first := !l.known
	l.labels, l.known = maps.Clone(labels), true
	l.once.Do(func() { close(l.settled) })
	select {
	case l.changed <- struct{}{}:
	default:
	}
	l.log.Info("node labels", "node", l.node, "labels", labels, "first", first)
}

// failed records a failed read. A refusal by the API server (a 4xx: no RBAC permission, no
// such Node) settles the wait at start: retries go on, but the agent need not wait for them.
func (l *nodeLabels) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = err
	var st *kubeapi.StatusError
	if errors.As(err, &st) && st.Code/100 == 4 {
		l.once.Do(func() { close(l.settled) })
	}
}

// run keeps the labels until ctx ends.
func (l *nodeLabels) run(ctx context.Context) {
	failures, canWatch, said := 0, true, ""
	retry := func(err error) bool {
		l.failed(err)
		delay := min(l.minRetry<<min(failures, 20), l.maxRetry)
		failures++
		level := slog.LevelWarn
		if err.Error() == said { // the same failure again: once at Warn is enough
			level = slog.LevelDebug
		}
		said = err.Error()
		l.log.Log(ctx, level, "read node labels", "node", l.node, "err", err, "retryIn", delay)
		return sleepCtx(ctx, delay)
	}
	for ctx.Err() == nil {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := l.api.GetNode(gctx, l.node)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !retry(err) {
				return
			}
			continue
		}
		failures, said = 0, ""
		l.set(n.Labels)
		if !canWatch {
			if !sleepCtx(ctx, l.pollEvery) {
				return
			}
			continue
		}
		err = l.watch(ctx, n.ResourceVersion)
		switch {
		case ctx.Err() != nil:
			return
		case kubeapi.IsForbidden(err):
			canWatch = false
			l.log.Warn("no permission to watch the node: polling its labels (RBAC: watch on nodes)", "node", l.node,
				"every", l.pollEvery, "err", err)
		case kubeapi.IsGone(err): // read the Node again at once
		default:
			if !retry(err) {
				return
			}
		}
	}
}

// watch follows the Node from resource version rv until the watch fails; a watch the server
// ends resumes where it left off (a short one only after minRetry, so that a server that
// ends every watch at once is not called in a loop).
func (l *nodeLabels) watch(ctx context.Context, rv string) error {
	for {
		start := time.Now()
		var err error
		rv, err = l.api.WatchNode(ctx, l.node, rv, l.watchTimeout, func(n kubeapi.NodeMeta) { l.set(n.Labels) })
		if err != nil {
			return err
		}
		if time.Since(start) < time.Second && !sleepCtx(ctx, l.minRetry) {
			return ctx.Err()
		}
	}
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
