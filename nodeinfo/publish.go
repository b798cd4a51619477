package nodeinfo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Publisher keeps a Node's core-scheduling label and core-count annotation in step with
// Info. It is off every hot path: it reads Info every Every and patches only on a change.
type Publisher struct {
	Client kubernetes.Interface
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

// Publish patches the Node once.
func (p *Publisher) Publish(ctx context.Context, info Info) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := p.Client.CoreV1().Nodes().Patch(ctx, p.Node, types.MergePatchType, MergePatch(info), metav1.PatchOptions{FieldManager: "podfence-agent"})
	if err != nil {
		return fmt.Errorf("patch node %s: %w", p.Node, err)
	}
	return nil
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// ErrNoAPIServer: no kubeconfig was given and the process does not run in a pod.
var ErrNoAPIServer = errors.New("no kubeconfig and not in a pod")

// NewClient connects to the API server of kubeconfig or, when it is empty, of the pod the
// process runs in (ErrNoAPIServer outside a pod).
func NewClient(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); errors.Is(err, rest.ErrNotInCluster) {
		return nil, ErrNoAPIServer
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = userAgent
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// Start runs a Publisher for node in the background when an API server is reachable from
// kubeconfig or the pod; without one, or without a node name, it logs at debug and returns.
// It never blocks.
func Start(ctx context.Context, kubeconfig, node string, info func() Info, log *slog.Logger) {
	if node == "" {
		log.Debug("node info not published: no node name")
		return
	}
	c, err := NewClient(kubeconfig, "podfence-agent")
	if errors.Is(err, ErrNoAPIServer) {
		log.Debug("node info not published", "reason", err)
		return
	}
	if err != nil {
		log.Warn("node info not published", "err", err)
		return
	}
	p := &Publisher{Client: c, Node: node, Info: info, Log: log}
	go func() { _ = p.Run(ctx) }()
}
