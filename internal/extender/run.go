package extender

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/regfile"
)

// assignedLive selects the pods that count: bound to a node and not finished.
const assignedLive = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// Watch starts shared informers on bound pods and on nodes that keep c up to date until ctx
// ends, and waits for their first lists.
func Watch(ctx context.Context, client kubernetes.Interface, c *Cache) error {
	pods := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = assignedLive }))
	nodes := informers.NewSharedInformerFactory(client, 0)
	podReg, err := pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { setPod(c, o) },
		UpdateFunc: func(_, o any) { setPod(c, o) },
		DeleteFunc: func(o any) {
			if p, ok := unwrap(o).(*corev1.Pod); ok {
				c.DeletePod(p.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	nodeReg, err := nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { setNode(c, o) },
		UpdateFunc: func(_, o any) { setNode(c, o) },
		DeleteFunc: func(o any) {
			if n, ok := unwrap(o).(*corev1.Node); ok {
				c.DeleteNode(n.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("node informer: %w", err)
	}
	pods.Start(ctx.Done())
	nodes.Start(ctx.Done())
	// The handlers, not only the informers' stores, must have seen the first lists.
	if !cache.WaitForCacheSync(ctx.Done(), podReg.HasSynced, nodeReg.HasSynced) {
		return fmt.Errorf("sync pods and nodes: %w", context.Cause(ctx))
	}
	return nil
}

func setPod(c *Cache, o any) {
	if p, ok := o.(*corev1.Pod); ok {
		c.SetPod(p)
	}
}

func setNode(c *Cache, o any) {
	if n, ok := o.(*corev1.Node); ok {
		c.SetNode(n)
	}
}

// unwrap returns the last known object of a delete seen late.
func unwrap(o any) any {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return o
}

// Config is what Run needs.
type Config struct {
	Client       kubernetes.Interface
	Address      string // listen address, e.g. "127.0.0.1:8888"
	DefaultGroup coresched.DefaultGroup
	// CertFile and KeyFile, if both set, serve HTTPS.
	CertFile, KeyFile string
	// Insecure allows plain HTTP on an address other than loopback (CheckListen).
	Insecure bool
}

// Run fills a Cache from the API server, then serves the extender API on cfg.Address until
// ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	insecure, err := CheckListen(cfg)
	if err != nil {
		return fmt.Errorf("listen address %w", err)
	}
	if insecure {
		log.Warn("serving plain HTTP on an address other than loopback (--insecure-listen): whoever reaches it can read "+
			"what the scheduler sends and answer for it", "address", cfg.Address)
	}
	var tlsConfig *tls.Config
	if cfg.CertFile != "" && cfg.KeyFile != "" {
		cert, err := regfile.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile) // no FIFO: its open would never return
		if err != nil {
			return fmt.Errorf("TLS key pair %s, %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	c := NewCache(cfg.DefaultGroup, log)
	start := time.Now()
	if err := Watch(ctx, cfg.Client, c); err != nil {
		return err
	}
	log.Info("informers synced", "after", time.Since(start).Round(time.Millisecond), "nodes", c.Len())
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := newServer(NewHandler(c, cfg.DefaultGroup, log), serverTimeouts, log)
	srv.TLSConfig = tlsConfig
	done := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			done <- srv.ServeTLS(ln, "", "")
		} else {
			done <- srv.Serve(ln)
		}
	}()
	log.Info("serving the scheduler extender API", "address", ln.Addr().String(), "tls", cfg.CertFile != "")
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
