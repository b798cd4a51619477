// Package metrics serves the agent's operator endpoint:
//
//   - /metrics: Prometheus metrics in the text exposition format
//     (https://prometheus.io/docs/instrumenting/exposition_formats/) from a registry the
//     caller fills;
//   - /healthz: 200 "ok" while the process serves;
//   - /readyz: 200 "ok" once the caller's readiness check passes (WithReady), else 503;
//   - /state: the caller's state as JSON (WithState), e.g. the node report of package status.
//
// /metrics and /state carry node data: with AuthKubernetes (WithSecurity) only callers whose
// bearer token the API server allows to get the path read them, over HTTPS; unguarded,
// they are served on loopback addresses only. /healthz and /readyz are open to probes.
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
	"golang.org/x/net/netutil"
)

// DefaultAddress is where the agent serves unless told otherwise: loopback only, as the
// agent runs with host networking.
const DefaultAddress = "127.0.0.1:9464"

// Limits bound the server's connections and requests.
type Limits struct {
	// ReadHeader, Read and Write bound a request's header, the whole request, and the time
	// to its answer's end (the token review and the scrape included); Idle bounds a kept-alive
	// connection between requests.
	ReadHeader, Read, Write, Idle time.Duration
	// MaxHeaderBytes bounds a request's header (a bearer token is 1-4 KiB).
	MaxHeaderBytes int
	// MaxConnections bounds the connections served at once (each carries one request at a
	// time: HTTP/2 is off); more wait to be accepted.
	MaxConnections int
}

// DefaultLimits suit a scrape every few seconds, kubelet probes and `podfence status`.
var DefaultLimits = Limits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second,
	Idle: 60 * time.Second, MaxHeaderBytes: 16 << 10, MaxConnections: 32}

func (l Limits) orDefault() Limits {
	d := DefaultLimits
	for _, f := range []struct{ v, def *time.Duration }{{&l.ReadHeader, &d.ReadHeader}, {&l.Read, &d.Read},
		{&l.Write, &d.Write}, {&l.Idle, &d.Idle}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = d.MaxConnections
	}
	return l
}

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
	guard := func(h http.Handler) http.Handler { return h }
	if o.security.Auth == AuthKubernetes {
		guard = o.security.Guard
		if guard == nil { // fail closed
			guard = func(http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					text(w, http.StatusServiceUnavailable, "no reviewer of tokens")
				})
			}
		}
	}
	mux.Handle("GET /metrics", guard(promhttp.HandlerFor(g, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", o.readyz)
	if o.state != nil {
		mux.Handle("GET /state", guard(http.HandlerFunc(o.serveState)))
	}
	return mux
}

// Server serves Handler on a listening socket. Create it with Listen; stop it with Close.
type Server struct {
	ln     net.Listener
	srv    *http.Server
	limits Limits
	done   chan error
}

// Listen binds addr now, so that a bad or taken address fails the caller at start, and
// serves g there in the background, within Limits (WithLimits; DefaultLimits). It refuses
// to serve /metrics and /state unguarded on an address other than loopback (CheckAuth).
func Listen(addr string, g prometheus.Gatherer, log *slog.Logger, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sec, lim := o.security, o.limits.orDefault()
	if err := CheckAuth(sec.Auth, addr); err != nil {
		return nil, err
	}
	if sec.Auth == AuthKubernetes && sec.Guard == nil {
		return nil, errors.New("metrics authentication kubernetes: no reviewer of tokens")
	}
	tc, certFrom, err := sec.tlsConfig(addr)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true) // no HTTP/2: one request per connection at a time, bounded by MaxConnections
	s := &Server{ln: ln, done: make(chan error, 1), limits: lim,
		srv: &http.Server{Handler: Handler(g, opts...), TLSConfig: tc, Protocols: &protocols,
			ReadHeaderTimeout: lim.ReadHeader, ReadTimeout: lim.Read, WriteTimeout: lim.Write, IdleTimeout: lim.Idle,
			MaxHeaderBytes: lim.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	limited := netutil.LimitListener(ln, lim.MaxConnections)
	go func() {
		if tc != nil {
			s.done <- s.srv.ServeTLS(limited, "", "")
		} else {
			s.done <- s.srv.Serve(limited)
		}
	}()
	auth := sec.Auth
	if auth == "" {
		auth = AuthNone
	}
	attrs := []any{"address", ln.Addr().String(), "scheme", "http", "auth", auth}
	if tc != nil {
		attrs[3] = "https"
		attrs = append(attrs, "certificate", certFrom)
	}
	log.Info("serving metrics", append(attrs, "paths", "/metrics /healthz /readyz /state")...)
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
