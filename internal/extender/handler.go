package extender

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// Requests served at once (each holds what decode.go bounds), and the nodes between two
// looks at a request's context.
const (
	maxInFlight = 4
	checkEvery  = 256
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

// request is a decoded ExtenderArgs: the pod, the candidate names (NodeNames, or the names
// of Nodes) and their facts.
type request struct {
	podObj *corev1.Pod
	byName bool        // NodeNames given (nodeCacheCapable: true)
	names  []string    // the candidates, in the order sent
	nodes  []candidate // what was kept of Nodes, when they were sent instead of names
	pod    Pod
	err    error // the pod's group labels are unusable
	facts  []Facts
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
	if r.ContentLength > maxBody {
		return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxBody)}
	}
	q, err := decodeArgs(w, r)
	if err != nil {
		return nil, err
	}
	if err := r.Context().Err(); err != nil {
		return nil, fmt.Errorf("request ended: %w", err)
	}
	return q, nil
}

// lookUp finds the pod's group and the candidates' facts.
func (h *handler) lookUp(ctx context.Context, q *request) error {
	q.pod, q.err = PodFor(h.def, q.podObj)
	q.facts = make([]Facts, len(q.names))
	h.cache.Each(q.names, q.pod.Group.ID(), func(i int, n Facts) { q.facts[i] = n })
	for i, c := range q.nodes {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return fmt.Errorf("request ended: %w", ctx.Err())
		}
		if c.published { // a node object's published support and core count win over the cache's
			q.facts[i].Known, q.facts[i].CoreSched, q.facts[i].Cores = true, c.info.CoreSched, c.info.PhysicalCores
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("request ended: %w", err)
	}
	return nil
}

func (h *handler) filter(w http.ResponseWriter, r *http.Request) {
	q, ok := h.decode(w, r)
	if !ok {
		return
	}
	res := filterReply{}
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
	if q.byName {
		names := make([]string, 0, len(q.names))
		for i, name := range q.names {
			if pass[i] {
				names = append(names, name)
			}
		}
		res.NodeNames = &names
	} else {
		list := &nodeRefs{Items: make([]nodeRef, 0, len(q.names))}
		for i, name := range q.names {
			if pass[i] {
				list.Items = append(list.Items, nodeRef{Metadata: nameMeta{Name: name}})
			}
		}
		res.Nodes = list
	}
	h.log.Debug("filter", "pod", podName(q.podObj), "group", q.pod.Group, "nodes", len(q.names),
		"refused", len(res.FailedAndUnresolvableNodes))
	h.reply(w, res)
}

// filterReply is extenderv1.ExtenderFilterResult as JSON, but the nodes that pass, when
// Nodes were sent, go back by name only: kube-scheduler looks each one up by its name among
// those it sent and reads nothing else of them (a full Node would cost the memory and
// bytes of the request again).
type filterReply struct {
	Nodes                      *nodeRefs `json:",omitempty"`
	NodeNames                  *[]string `json:",omitempty"`
	FailedNodes                extenderv1.FailedNodesMap
	FailedAndUnresolvableNodes extenderv1.FailedNodesMap
	Error                      string
}

// nodeRefs is a NodeList of names.
type nodeRefs struct {
	Items []nodeRef `json:"items"`
}

type nodeRef struct {
	Metadata nameMeta `json:"metadata"`
}

type nameMeta struct {
	Name string `json:"name"`
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
	h.log.Debug("prioritize", "pod", podName(q.podObj), "group", q.pod.Group, "nodes", len(q.names))
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
