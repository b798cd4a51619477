package nodeinfo

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/podfence/podfence/internal/kube/kubeapi"
)

// Publisher keeps a Node's core-scheduling label and core-count annotation in step with
// Info. It is off every hot path: it reads Info every Every and patches only on a change.
type Publisher struct {
	Client *kubeapi.Client
	Node   string
	Info   func() Info
	Every  time.Duration // how often Info is re-read (default 30 s)
	Retry  time.Duration // first delay after a failed patch, doubling up to MaxRetry (default 1 s)
	// MaxRetry caps the delay between failed patches (default 2 min).
	MaxRetry time.Duration
	Log      *slog.Logger
}

// Run publishes Info until ctx ends: at once, after each change, and again after a failure
// with exponential backoff. It returns ctx's error.
func (p *Publisher) Run(ctx context.Context) error {
	every, retry, maxRetry := or(p.Every, 30*time.Second), or(p.Retry, time.Second), or(p.MaxRetry, 2*time.Minute)
	var last Info
	published, failures := false, 0
	for {
		delay := every
		if cur := p.Info(); !published || cur != last {
			if err := p.Publish(ctx, cur); err != nil {
				delay = min(retry<<min(failures, 20), maxRetry)
				failures++
				p.Log.Warn("publish node info", "node", p.Node, "err", err, "retryIn", delay)
			} else {
				p.Log.Info("published node info", "node", p.Node, LabelCoreSched, cur.CoreSched,
					AnnotationPhysicalCores, cur.PhysicalCores)
				last, published, failures = cur, true, 0
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// Publish patches the Node once (merge patch; RBAC: patch on nodes).
func (p *Publisher) Publish(ctx context.Context, info Info) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	path := "/api/v1/nodes/" + url.PathEscape(p.Node) + "?fieldManager=" + fieldManager
	if _, err := p.Client.Call(ctx, http.MethodPatch, path, "application/merge-patch+json", MergePatch(info)); err != nil {
		return fmt.Errorf("patch node %s: %w", p.Node, err)
	}
	return nil
}

// fieldManager names the agent in the Node's managedFields.
const fieldManager = "podfence-agent"

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Start runs a Publisher for node in the background through c, the client the agent
// built for the API server (of a kubeconfig or of its pod). Without a client or a node
// name it logs at debug and returns. It never blocks.
func Start(ctx context.Context, c *kubeapi.Client, node string, info func() Info, log *slog.Logger) {
	switch {
	case node == "":
		log.Debug("node info not published: no node name")
		return
	case c == nil:
		log.Debug("node info not published: no API server")
		return
	}
	p := &Publisher{Client: c, Node: node, Info: info, Log: log}
	go func() { _ = p.Run(ctx) }()
}
