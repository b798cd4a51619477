// Package metrics serves the agent's operator endpoint:
//
//   - /metrics: Prometheus metrics in the text exposition format
//     (https://prometheus.io/docs/instrumenting/exposition_formats/) from a registry the
//     caller fills;
//   - /healthz: 200 "ok" while the process serves;
//   - /readyz: 200 "ok" once the caller's readiness check passes (WithReady), else 503;
//   - /state: the caller's state as JSON (WithState), e.g. the node report of package status.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddress is where the agent serves unless told otherwise: loopback only, as the
// agent runs with host networking.
const DefaultAddress = "127.0.0.1:9464"

// NewRegistry returns a registry holding the Go runtime and process collectors; the agent's
// parts register their own collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves /metrics from g, /healthz, /readyz and, with WithState, /state.
func Handler(g prometheus.Gatherer, opts ...Option) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", o.readyz)
	if o.state != nil {
		mux.HandleFunc("GET /state", o.serveState)
	}
	return mux
}

// Server serves Handler on a listening socket. Create it with Listen; stop it with Close.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// Listen binds addr now, so that a bad or taken address fails the caller at start, and
// serves g there in the background.
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger, opts ...Option) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	s := &Server{ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: Handler(g, opts...), ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() { s.done <- s.srv.Serve(ln) }()
	log.Info("serving metrics", "address", ln.Addr().String(), "paths", "/metrics /healthz /readyz /state")
	return s, nil
}

// Addr returns the address served (the port chosen for ":0").
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops serving, letting requests in flight finish until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("stop metrics server: %w", err)
	}
	return nil
}
