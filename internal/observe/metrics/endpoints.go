package metrics

import (
	"encoding/json"
	"net/http"
)

// Option adds to what Handler and Listen serve.
type Option func(*options)

type options struct {
	ready    func() error
	state    func() any
	security Security
	limits   Limits
}

// WithReady makes /readyz answer 503 with ready's error (without it, with AuthKubernetes)
// until it returns nil. Without it, /readyz answers like /healthz.
func WithReady(ready func() error) Option { return func(o *options) { o.ready = ready } }

// WithState serves state() as indented JSON at /state. It is called once per request and
// must be safe for concurrent use.
func WithState(state func() any) Option { return func(o *options) { o.state = state } }

// WithSecurity guards /metrics and /state (see Security). Without it, Listen serves them to
// anyone, on a loopback address only.
func WithSecurity(s Security) Option { return func(o *options) { o.security = s } }

// WithLimits replaces DefaultLimits (HealthLimits for ListenHealth); zero fields keep the default.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// health serves /healthz and /readyz on mux.
func (o *options) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", o.readyz)
}

// readyz answers ok or not ready, with the reason only where /state is open too (with
// AuthKubernetes the probe is the only unauthenticated path: it tells nothing more).
func (o *options) readyz(w http.ResponseWriter, _ *http.Request) {
	if o.ready != nil {
		if err := o.ready(); err != nil {
			msg := "not ready"
			if o.security.Auth != AuthKubernetes {
				msg += ": " + err.Error()
			}
			text(w, http.StatusServiceUnavailable, msg)
			return
		}
	}
	text(w, http.StatusOK, "ok")
}

func (o *options) serveState(w http.ResponseWriter, _ *http.Request) {
	b, err := json.MarshalIndent(o.state(), "", "  ")
	if err != nil {
		text(w, http.StatusInternalServerError, "encode state: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
