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
// they are served on loopback addresses only. /healthz and /readyz are open to probes, and
// ListenHealth serves them alone on a listener of their own (loopback: the kubelet's probes),
// so that no client of the network can starve the probes by holding connections.
package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/podfence/podfence/internal/servers/connguard"
)

// DefaultAddress is where the agent serves unless told otherwise: loopback only, as the
// agent runs with host networking.
const DefaultAddress = "127.0.0.1:9464"

// DefaultHealthAddress is where the agent answers the kubelet's probes (ListenHealth).
const DefaultHealthAddress = "127.0.0.1:9465"

// Limits bound the server's connections and requests.
type Limits struct {
	// ReadHeader, Read and Write bound a request's header, the whole request, and the time
	// to its answer's end (the token review and the scrape included); Idle bounds a kept-alive
	// connection between requests.
	ReadHeader, Read, Write, Idle time.Duration
	// MaxHeaderBytes bounds a request's header (a bearer token is 1-4 KiB).
	MaxHeaderBytes int
	// MaxConnections bounds the connections held at once (each carries one request at a
	// time: HTTP/2 is off). A new connection beyond it evicts the one that has waited longest
	// without a request in a handler (package connguard): accepting never waits.
	MaxConnections int
	// PerSource bounds the connections from one IP address; more are closed at once.
	PerSource int
}

// DefaultLimits suit a scrape every few seconds and `podfence status` from a few sources.
var DefaultLimits = Limits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second,
	Idle: 60 * time.Second, MaxHeaderBytes: 16 << 10, MaxConnections: 64, PerSource: 8}

// HealthLimits bound the health listener (ListenHealth): the kubelet's probes send their
// request at once and close the connection after the answer.
var HealthLimits = Limits{ReadHeader: 2 * time.Second, Read: 2 * time.Second, Write: 5 * time.Second,
	Idle: time.Second, MaxHeaderBytes: 4 << 10, MaxConnections: 32}

func (l Limits) orDefault(d Limits) Limits {
	for _, f := range []struct{ v, def *time.Duration }{{&l.ReadHeader, &d.ReadHeader}, {&l.Read, &d.Read},
		{&l.Write, &d.Write}, {&l.Idle, &d.Idle}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	for _, f := range []struct{ v, def *int }{{&l.MaxHeaderBytes, &d.MaxHeaderBytes}, {&l.MaxConnections, &d.MaxConnections},
		{&l.PerSource, &d.PerSource}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
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
	o.health(mux)
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
	conns  *connguard.Guard
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
	sec, lim := o.security, o.limits.orDefault(DefaultLimits)
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
	s, err := serve(addr, Handler(g, opts...), tc, lim, log)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	auth := sec.Auth
	if auth == "" {
		auth = AuthNone
	}
	attrs := []any{"address", s.Addr().String(), "scheme", "http", "auth", auth}
	if tc != nil {
		attrs[3] = "https"
		attrs = append(attrs, "certificate", certFrom)
	}
	log.Info("serving metrics", append(attrs, "paths", "/metrics /healthz /readyz /state", "maxConnections", lim.MaxConnections,
		"perSource", lim.PerSource)...)
	return s, nil
}

// ListenHealth serves /healthz and /readyz (WithReady) alone, over plain HTTP, within
// HealthLimits (WithLimits replaces them), with keep-alives off. Bind it to a loopback
// address: the kubelet probes it there (a hostNetwork pod's probe with host 127.0.0.1),
// where no client from the network can hold its connections. /readyz tells its reason only
// on a loopback address.
func ListenHealth(addr string, log *slog.Logger, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !Loopback(addr) {
		o.security.Auth = AuthKubernetes // terse /readyz: it is the one thing served
	}
	lim := o.limits.orDefault(HealthLimits)
	mux := http.NewServeMux()
	o.health(mux)
	s, err := serve(addr, mux, nil, lim, log)
	if err != nil {
		return nil, fmt.Errorf("health address %s: %w", addr, err)
	}
	s.srv.SetKeepAlivesEnabled(false)
	log.Info("serving health", "address", s.Addr().String(), "scheme", "http", "paths", "/healthz /readyz",
		"maxConnections", lim.MaxConnections)
	return s, nil
}

// serve binds addr and serves h there (TLS with tc) in the background within lim.
func serve(addr string, h http.Handler, tc *tls.Config, lim Limits, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true) // no HTTP/2: one request per connection at a time, bounded by MaxConnections
	s := &Server{ln: ln, done: make(chan error, 1), limits: lim,
		conns: connguard.New(connguard.Limits{Max: lim.MaxConnections, PerSource: lim.PerSource}),
		srv: &http.Server{Handler: h, TLSConfig: tc, Protocols: &protocols,
			ReadHeaderTimeout: lim.ReadHeader, ReadTimeout: lim.Read, WriteTimeout: lim.Write, IdleTimeout: lim.Idle,
			MaxHeaderBytes: lim.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	s.conns.Wire(s.srv)
	guarded := s.conns.Listener(ln)
	go func() {
		if tc != nil {
			s.done <- s.srv.ServeTLS(guarded, "", "")
		} else {
			s.done <- s.srv.Serve(guarded)
		}
	}()
	return s, nil
}

// Connections returns what the server's connection guard did so far.
func (s *Server) Connections() connguard.Stats { return s.conns.Stats() }

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
