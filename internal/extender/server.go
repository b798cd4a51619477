package extender

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// timeouts bound a connection's phases; write also bounds a request's work (newServer).
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// serverTimeouts: kube-scheduler waits 5 s for an extender by default (httpTimeout); reading a
// 100 MB body takes well under a second on loopback or in-cluster. write counts from the
// end of the headers to the end of the reply, so it covers the request's work.
var serverTimeouts = timeouts{readHeader: 5 * time.Second, read: 30 * time.Second, write: 60 * time.Second,
	idle: 90 * time.Second}

// maxHeaderBytes bounds a request's headers.
const maxHeaderBytes = 64 << 10

// newServer is the extender's HTTP server for h. A request's context ends when its write
// timeout does: past it, no reply can be written, so the work stops.
func newServer(h http.Handler, t timeouts, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           withDeadline(h, t.write),
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func withDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// CheckListen refuses plain HTTP on an address other than loopback unless cfg.Insecure
// allows it; it reports whether it does. The error names the address. "localhost" and loopback IPs are loopback; an
// empty host (every interface) and other names are not.
func CheckListen(cfg Config) (insecure bool, err error) {
	host, _, err := net.SplitHostPort(cfg.Address)
	if err != nil {
		return false, fmt.Errorf("%q: %w", cfg.Address, err)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "localhost" || ip != nil && ip.IsLoopback():
		return false, nil
	case cfg.CertFile != "" && cfg.KeyFile != "":
		return false, nil
	case !cfg.Insecure:
		return false, fmt.Errorf("%q: want a loopback address, or HTTPS (--tls-cert and --tls-key), or --insecure-listen "+
			"to serve plain HTTP there", cfg.Address)
	}
	return true, nil
}
