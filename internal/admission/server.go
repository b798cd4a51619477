package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/podfence/podfence/internal/servers/connguard"
)

// Options configure Serve.
type Options struct {
	CertFile, KeyFile string // PEM files, read again when they change
	// LoadConfig reads the Config (pools and profiles); nil serves the empty Config. It runs
	// at start, where an error stops Serve, and then every ReloadInterval, where an error
	// keeps the Config in use.
	LoadConfig func() (*Config, error)
	// ReloadInterval is how often the certificate files and the config are checked for
	// changes; 10s when 0.
	ReloadInterval time.Duration
	Limits         Limits // reviews in flight and their time
	// IdleTimeout closes a keep-alive connection idle that long; DefaultIdleTimeout when 0.
	IdleTimeout time.Duration
}

// shutdownTimeout bounds how long Serve waits for requests in flight when ctx ends.
const shutdownTimeout = 10 * time.Second

// Bounds on a connection: a client slow to send its headers is closed at 5 s, one slow to
// send its body when its review's time is up (Limits.Timeout, which is at most readTimeout).
const (
	readHeaderTimeout  = 5 * time.Second
	readTimeout        = 15 * time.Second
	writeTimeout       = 15 * time.Second
	DefaultIdleTimeout = 90 * time.Second
	maxHeaderBytes     = 64 << 10
)

// Connections bounds the webhook's connections (package connguard): the API server keeps one
// or a few per replica of it, the kubelet's probes one each; a source that holds more, or a
// flood from many, cannot keep them or the probes out.
var Connections = connguard.Limits{Max: 256, PerSource: 32}

// newServer is the webhook's HTTP server for h, with TLS 1.2 or later from certs.
func newServer(h http.Handler, certs *CertReloader, opts Options, log *slog.Logger) *http.Server {
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Serve serves NewHandler over TLS on ln until ctx ends, then shuts down gracefully.
// ln is closed when Serve returns.
func Serve(ctx context.Context, ln net.Listener, opts Options, log *slog.Logger) error {
	defer func() { _ = ln.Close() }() // also closed by the server; a second Close is harmless
	certs, err := NewCertReloader(opts.CertFile, opts.KeyFile)
	if err != nil {
		return err
	}
	load := opts.LoadConfig
	if load == nil {
		load = func() (*Config, error) { return &Config{}, nil }
	}
	cfg, err := load()
	if err != nil {
		return fmt.Errorf("webhook config: %w", err)
	}
	var current atomic.Pointer[Config]
	current.Store(cfg)
	logConfig(log, "config loaded", cfg)
	logCert(log, "serving certificate", certs)

	interval := reloadEvery(opts.ReloadInterval)
	var reloadFailures atomic.Int64
	cc := certCollector{certs: certs, failures: func() float64 { return float64(reloadFailures.Load()) }}
	srv := newServer(withMetrics(NewLimitedHandler(current.Load, log, opts.Limits), cc), certs, opts, log)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		reloadLoop(ctx, interval, certs, load, &current, &reloadFailures, log)
		sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Warn("shutdown", "error", err)
		}
	}()
	lim := opts.Limits.withDefaults()
	log.Info("serving", "address", ln.Addr().String(), "paths", []string{PathMutate, PathValidate, PathHealthz, PathMetrics},
		"maxInFlight", lim.MaxInFlight, "maxInFlightBytes", lim.MaxInFlightBytes, "inFlightWait", lim.Wait, "reviewTimeout", lim.Timeout)
	guard := connguard.New(Connections)
	guard.Wire(srv)
	err = srv.ServeTLS(guard.Listener(ln), "", "")
	cancel()
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("serve webhook: %w", err)
}

// reloadLoop checks the certificate and the config every interval until ctx ends. It logs a
// failure once until it changes, and each change it applies.
func reloadLoop(ctx context.Context, interval time.Duration, certs *CertReloader, load func() (*Config, error),
	current *atomic.Pointer[Config], certFailures *atomic.Int64, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastCertErr, lastConfigErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := certs.Reload()
		if err != nil {
			certFailures.Add(1)
		}
		switch {
		case err != nil && err.Error() != lastCertErr:
			log.Error("reload certificate: keeping the one served", "error", err)
		case changed:
			logCert(log, "certificate reloaded", certs)
		}
		lastCertErr = errText(err)
		cfg, err := load()
		switch {
		case err != nil && err.Error() != lastConfigErr:
			log.Error("reload config: keeping the one in use", "error", err)
		case err == nil && !reflect.DeepEqual(cfg, current.Load()):
			current.Store(cfg)
			logConfig(log, "config reloaded", cfg)
		}
		lastConfigErr = errText(err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func logConfig(log *slog.Logger, msg string, cfg *Config) {
	log.Info(msg, "poolConfigs", len(cfg.Pools), "pools", cfg.knownPools(), "profiles", len(cfg.Profiles))
}

func logCert(log *slog.Logger, msg string, certs *CertReloader) {
	c, _ := certs.GetCertificate(nil)
	if c.Leaf == nil {
		log.Info(msg)
		return
	}
	log.Info(msg, "subject", c.Leaf.Subject.String(), "dnsNames", c.Leaf.DNSNames, "notAfter", c.Leaf.NotAfter)
}

// defaultReload is how often files are checked when Options.ReloadInterval is not positive.
const defaultReload = 10 * time.Second

// reloadEvery is the reload interval Serve uses for Options.ReloadInterval d.
func reloadEvery(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultReload
	}
	return d
}
