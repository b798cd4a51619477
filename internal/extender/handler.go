package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	kjson "sigs.k8s.io/json"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
	"github.com/podfence/podfence/internal/kube/quantityguard"
)

// Bounds on a request. A scheduler without nodeCacheCapable sends full Node objects: 5,000
// of them are 50 to 100 MB. A request holds its body and what it decodes to (a few times the
// body) until it is answered; at most maxInFlight are served at once.
const (
	maxBody     = 128 << 20
	maxInFlight = 4
	checkEvery  = 256 // nodes between two looks at the request's context
)

// NewHandler serves the extender API over c: POST /filter (ExtenderFilterResult), POST
// /prioritize (HostPriorityList) and GET /healthz. Candidate nodes arrive as NodeNames
// (nodeCacheCapable: true) or as Node objects, whose published labels then win over c's.
// Requests are JSON (Content-Type application/json) with case-sensitive field names, as
// kube-scheduler writes them; beyond maxInFlight at once they are refused with 503.
func NewHandler(c *Cache, def coresched.DefaultGroup, log *slog.Logger) http.Handler {
	return newHandler(c, def, log, maxInFlight)
}

func newHandler(c *Cache, def coresched.DefaultGroup, log *slog.Logger, inFlight int) http.Handler {
	h := &handler{cache: c, def: def, log: log, slots: make(chan struct{}, inFlight)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", h.limit(h.filter))
	mux.HandleFunc("POST /prioritize", h.limit(h.prioritize))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

type handler struct {
	cache *Cache
	def   coresched.DefaultGroup
	log   *slog.Logger
	slots chan struct{} // one per request being served
}

// limit serves a request if a slot is free, and refuses it with 503 at once if not.
func (h *handler) limit(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.slots <- struct{}{}:
			defer func() { <-h.slots }()
		default:
			w.Header().Set("Retry-After", "1")
			h.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("%d requests in flight already: retry", cap(h.slots)))
			return
		}
		next(w, r)
	}
}

// request is a decoded ExtenderArgs: the pod, the candidate names and their facts.
type request struct {
	args  extenderv1.ExtenderArgs
	names []string
	pod   Pod
	err   error // the pod's group labels are unusable
	facts []Facts
}

// httpError is a request refused with status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// decode reads the request's ExtenderArgs, bounding its quantity fields before decoding it,
// and looks up the candidates' facts; on error it has answered.
func (h *handler) decode(w http.ResponseWriter, r *http.Request) (*request, bool) {
	q, err := h.read(w, r)
	if err == nil {
		err = h.lookUp(r.Context(), q)
	}
	if err != nil {
		he := (*httpError)(nil)
		if !errors.As(err, &he) {
			he = &httpError{http.StatusServiceUnavailable, err.Error()}
		}
		h.fail(w, r, he.status, he.msg)
		return nil, false
	}
	return q, true
}

func (h *handler) read(w http.ResponseWriter, r *http.Request) (*request, error) {
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		return nil, &httpError{http.StatusUnsupportedMediaType, fmt.Sprintf("content type %q: want application/json",
			r.Header.Get("Content-Type"))}
	}
	body, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := quantityguard.Check(body, quantityguard.For[extenderv1.ExtenderArgs](), "ExtenderArgs"); err != nil {
		return nil, badRequest("%v", err)
	}
	if err := r.Context().Err(); err != nil {
		return nil, fmt.Errorf("request ended: %w", err)
	}
	var q request
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &q.args); err != nil {
		return nil, badRequest("decode ExtenderArgs: %v", err)
	}
	a := &q.args
	switch {
	case a.Pod == nil:
		return nil, badRequest("ExtenderArgs: no Pod")
	case a.NodeNames != nil:
		q.names = *a.NodeNames
	case a.Nodes != nil:
		q.names = make([]string, len(a.Nodes.Items))
		for i := range a.Nodes.Items {
			q.names[i] = a.Nodes.Items[i].Name
		}
	default:
		return nil, badRequest("ExtenderArgs: neither NodeNames nor Nodes")
	}
	return &q, nil
}

// readBody reads the request body, up to maxBody bytes, into a buffer of its announced size.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	tooBig := &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxBody)}
	if r.ContentLength > maxBody {
		return nil, tooBig
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBody))
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, tooBig
	} else if err != nil {
		return nil, badRequest("read request body: %v", err)
	}
	return buf.Bytes(), nil
}

// lookUp finds the pod's group and the candidates' facts.
func (h *handler) lookUp(ctx context.Context, q *request) error {
	q.pod, q.err = PodFor(h.def, q.args.Pod)
	q.facts = make([]Facts, len(q.names))
	h.cache.Each(q.names, q.pod.Group.ID(), func(i int, n Facts) { q.facts[i] = n })
	if q.args.NodeNames == nil {
		for i := range q.args.Nodes.Items {
			if i%checkEvery == 0 && ctx.Err() != nil {
				return fmt.Errorf("request ended: %w", ctx.Err())
			}
			overlay(&q.facts[i], &q.args.Nodes.Items[i])
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("request ended: %w", err)
	}
	return nil
}

// overlay takes a node object's published support and core count over the cache's.
func overlay(f *Facts, n *corev1.Node) {
	info, ok, err := nodeinfo.Read(n)
	if !ok || err != nil {
		return
	}
	f.Known, f.CoreSched, f.Cores = true, info.CoreSched, info.PhysicalCores
}

func (h *handler) filter(w http.ResponseWriter, r *http.Request) {
	q, ok := h.decode(w, r)
	if !ok {
		return
	}
	res := extenderv1.ExtenderFilterResult{}
	pass := make([]bool, len(q.names))
	why := reasonsFor(q.pod, q.err)
	for i, n := range q.facts {
		if i%checkEvery == 0 && r.Context().Err() != nil {
			h.fail(w, r, http.StatusServiceUnavailable, "request ended: "+r.Context().Err().Error())
			return
		}
		reason := why.of(q.pod, q.err, n)
		if pass[i] = reason == ""; !pass[i] {
			if res.FailedAndUnresolvableNodes == nil {
				res.FailedAndUnresolvableNodes = extenderv1.FailedNodesMap{}
			}
			res.FailedAndUnresolvableNodes[q.names[i]] = reason
		}
	}
	if q.args.NodeNames != nil {
		names := make([]string, 0, len(q.names))
		for i, name := range q.names {
			if pass[i] {
				names = append(names, name)
			}
		}
		res.NodeNames = &names
	} else {
		list := &corev1.NodeList{Items: make([]corev1.Node, 0, len(q.names))}
		for i := range q.args.Nodes.Items {
			if pass[i] {
				list.Items = append(list.Items, q.args.Nodes.Items[i])
			}
		}
		res.Nodes = list
	}
	h.log.Debug("filter", "pod", podName(q.args.Pod), "group", q.pod.Group, "nodes", len(q.names),
		"refused", len(res.FailedAndUnresolvableNodes))
	h.reply(w, res)
}

func (h *handler) prioritize(w http.ResponseWriter, r *http.Request) {
	q, ok := h.decode(w, r)
	if !ok {
		return
	}
	list := make(extenderv1.HostPriorityList, len(q.names))
	for i, name := range q.names {
		if i%checkEvery == 0 && r.Context().Err() != nil {
			h.fail(w, r, http.StatusServiceUnavailable, "request ended: "+r.Context().Err().Error())
			return
		}
		s := Neutral
		if q.err == nil {
			s = Score(q.pod, q.facts[i])
		}
		list[i] = extenderv1.HostPriority{Host: name, Score: s}
	}
	h.log.Debug("prioritize", "pod", podName(q.args.Pod), "group", q.pod.Group, "nodes", len(q.names))
	h.reply(w, list)
}

func (h *handler) reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		h.log.Warn("write extender response", "err", err)
	}
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.log.Warn("extender request refused", "path", r.URL.Path, "remote", r.RemoteAddr, "status", status, "error", msg)
	http.Error(w, msg, status)
}

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
