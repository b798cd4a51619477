package nodeinfo_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// apiServer serves one Node as the API server does to a PATCH with a JSON merge patch: it
// applies the patch and answers with the Node. It records the requests; fail answers the next ones with an error Status.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	node map[string]any
	seen []string // "PATCH /api/v1/nodes/n1?fieldManager=... application/merge-patch+json"
	fail []int    // codes of the next answers
}

func newAPIServer(t *testing.T, node string) *apiServer {
	t.Helper()
	s := &apiServer{node: map[string]any{"kind": "Node", "apiVersion": "v1",
		"metadata": map[string]any{"name": node, "labels": map[string]any{"keep": "me"}}}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type"))
	name := s.node["metadata"].(map[string]any)["name"].(string)
	status := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "code": code})
	}
	var patch map[string]any
	switch {
	case r.URL.Path != "/api/v1/nodes/"+name:
		status(http.StatusNotFound, "not found")
		return
	case len(s.fail) > 0:
		code := s.fail[0]
		s.fail = s.fail[1:]
		status(code, `nodes "`+name+`" is forbidden: no`)
		return
	case r.Method != http.MethodPatch || r.Header.Get("Content-Type") != "application/merge-patch+json":
		status(http.StatusUnsupportedMediaType, "want a merge patch")
		return
	case json.Unmarshal(body, &patch) != nil:
		status(http.StatusBadRequest, "bad patch")
		return
	default:
		merge(s.node, patch)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.node)
}

// merge applies a JSON merge patch (RFC 7386) to dst.
func merge(dst, patch map[string]any) {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			dv, _ := dst[k].(map[string]any)
			if dv == nil {
				dv = map[string]any{}
			}
			merge(dv, pv)
			dst[k] = dv
		default:
			dst[k] = v
		}
	}
}

// Node is the node as it is now.
func (s *apiServer) Node(t *testing.T) *corev1.Node {
	t.Helper()
	s.mu.Lock()
	b, err := json.Marshal(s.node)
	s.mu.Unlock()
	var n corev1.Node
	if err == nil {
		err = json.Unmarshal(b, &n)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &n
}

func (s *apiServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func (s *apiServer) failNext(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, codes...)
}
