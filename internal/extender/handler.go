package extender

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
)

// maxBody bounds a request: ExtenderArgs with full Node objects for thousands of nodes.
const maxBody = 128 << 20

// NewHandler serves the extender API over c: POST /filter (ExtenderFilterResult), POST
// /prioritize (HostPriorityList) and GET /healthz. Candidate nodes arrive as NodeNames
// (nodeCacheCapable: true) or as Node objects, whose published labels then win over c's.
func NewHandler(c *Cache, def coresched.DefaultGroup, log *slog.Logger) http.Handler {
	h := &handler{cache: c, def: def, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /filter", h.filter)
	mux.HandleFunc("POST /prioritize", h.prioritize)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

type handler struct {
	cache *Cache
	def   coresched.DefaultGroup
	log   *slog.Logger
}

// request is a decoded ExtenderArgs: the pod, the candidate names and their facts.
type request struct {
	args  extenderv1.ExtenderArgs
	names []string
	pod   Pod
	err   error // the pod's group labels are unusable
	facts []Facts
}

func (h *handler) decode(w http.ResponseWriter, r *http.Request) (*request, bool) {
	var q request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&q.args); err != nil {
		http.Error(w, fmt.Sprintf("decode ExtenderArgs: %v", err), http.StatusBadRequest)
		return nil, false
	}
	a := &q.args
	switch {
	case a.Pod == nil:
		http.Error(w, "ExtenderArgs: no Pod", http.StatusBadRequest)
		return nil, false
	case a.NodeNames != nil:
		q.names = *a.NodeNames
	case a.Nodes != nil:
		q.names = make([]string, len(a.Nodes.Items))
		for i := range a.Nodes.Items {
			q.names[i] = a.Nodes.Items[i].Name
		}
	default:
		http.Error(w, "ExtenderArgs: neither NodeNames nor Nodes", http.StatusBadRequest)
		return nil, false
	}
	q.pod, q.err = PodFor(h.def, a.Pod)
	q.facts = make([]Facts, len(q.names))
	h.cache.Each(q.names, q.pod.Group.ID(), func(i int, n Facts) { q.facts[i] = n })
	if a.NodeNames == nil {
		for i := range a.Nodes.Items {
			overlay(&q.facts[i], &a.Nodes.Items[i])
		}
	}
	return &q, true
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
	for i, n := range q.facts {
		why := refusal(q.pod, q.err, n)
		if pass[i] = why == ""; !pass[i] {
			if res.FailedAndUnresolvableNodes == nil {
				res.FailedAndUnresolvableNodes = extenderv1.FailedNodesMap{}
			}
			res.FailedAndUnresolvableNodes[q.names[i]] = why
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

// refusal says why a node cannot run the pod ("" when it can): the pod's group labels are
// unusable, or it explicitly asks for a group (or exclusive) and the node has no core
// scheduling. Policy none and implicit groups pass everywhere.
func refusal(p Pod, labelErr error, n Facts) string {
	switch {
	case labelErr != nil:
		return "podfence: " + labelErr.Error()
	case !p.Group.Explicit() || p.Group.None():
		return ""
	case !n.Known:
		return fmt.Sprintf("podfence: pod asks for core-scheduling group %s; node has no %s label (no podfence agent has reported it)",
			p.Group, nodeinfo.LabelCoreSched)
	case !n.CoreSched:
		return fmt.Sprintf("podfence: pod asks for core-scheduling group %s; node has %s=%s",
			p.Group, nodeinfo.LabelCoreSched, nodeinfo.Unsupported)
	}
	return ""
}

func (h *handler) prioritize(w http.ResponseWriter, r *http.Request) {
	q, ok := h.decode(w, r)
	if !ok {
		return
	}
	list := make(extenderv1.HostPriorityList, len(q.names))
	for i, name := range q.names {
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

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
