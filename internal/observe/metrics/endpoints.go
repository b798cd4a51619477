package metrics

import (
	"encoding/json"
	"net/http"
)

// Option adds to what Handler and Listen serve.
type Option func(*options)

type options struct {
	ready func() error
	state func() any
}

// WithReady makes /readyz answer 503 with ready's error until it returns nil. Without it,
// /readyz answers like /healthz.
func WithReady(ready func() error) Option { return func(o *options) { o.ready = ready } }

// WithState serves state() as indented JSON at /state. It is called once per request and
// must be safe for concurrent use.
func WithState(state func() any) Option { return func(o *options) { o.state = state } }

func (o *options) readyz(w http.ResponseWriter, _ *http.Request) {
	if o.ready != nil {
		if err := o.ready(); err != nil {
			text(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
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
