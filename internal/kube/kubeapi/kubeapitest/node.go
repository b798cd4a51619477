// Package kubeapitest is a fake API server for tests of the agent's reads of its Node: it
// serves one Node to GET /api/v1/nodes/<name> and to single-object watches
// (fieldSelector=metadata.name=<name>&watch=true), streaming a MODIFIED event at each label
// change, as kube-apiserver does. It is imported from _test.go files only.
package kubeapitest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// NodeServer serves one Node. Create it with NewNodeServer; it stops when the test ends.
type NodeServer struct {
	*httptest.Server
	name string
	done chan struct{} // closed at cleanup: ends open watches

	mu          sync.Mutex
	rv          int
	labels      map[string]string
	changed     chan struct{} // closed and replaced at each change
	end         chan struct{} // closed and replaced by EndWatches
	failGets    []int         // status codes of the next GETs
	forbidWatch bool
	expire      bool // the next watch gets 410 Gone
	gets        int
	watches     int
	open        int // watches in progress
}

// NewNodeServer serves Node name with labels over plain HTTP.
func NewNodeServer(tb testing.TB, name string, labels map[string]string) *NodeServer {
	tb.Helper()
	s := &NodeServer{name: name, done: make(chan struct{}), rv: 1, labels: maps.Clone(labels), changed: make(chan struct{}),
		end: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	tb.Cleanup(func() { close(s.done) }) // runs first: Close waits for open watches
	return s
}

// SetLabels replaces the Node's labels; open watches get a MODIFIED event.
func (s *NodeServer) SetLabels(labels map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	s.labels = maps.Clone(labels)
	close(s.changed)
	s.changed = make(chan struct{})
}

// EndWatches ends the open watches normally, as the server does at their timeoutSeconds.
func (s *NodeServer) EndWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.end)
	s.end = make(chan struct{})
}

// FailGets answers the next GETs with these status codes (a Status object).
func (s *NodeServer) FailGets(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failGets = append(s.failGets, codes...)
}

// ForbidWatch answers every watch with 403 Forbidden, as RBAC does without the watch verb.
func (s *NodeServer) ForbidWatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbidWatch = true
}

// ExpireWatch answers the next watch with an ERROR event 410 Gone (resource version too old).
func (s *NodeServer) ExpireWatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire = true
}

// Requests returns the GETs and watches served so far, and the watches still open.
func (s *NodeServer) Requests() (gets, watches, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets, s.watches, s.open
}

// Kubeconfig writes a kubeconfig for the server into dir and returns its path.
func (s *NodeServer) Kubeconfig(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "kubeconfig")
	text := fmt.Sprintf("{current-context: c, contexts: [{name: c, context: {cluster: k, user: u}}], "+
		"clusters: [{name: k, cluster: {server: '%s'}}], users: [{name: u, user: {token: t}}]}", s.URL)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func (s *NodeServer) node() map[string]any {
	return map[string]any{"kind": "Node", "apiVersion": "v1",
		"metadata": map[string]any{"name": s.name, "resourceVersion": strconv.Itoa(s.rv), "labels": maps.Clone(s.labels)}}
}

func status(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "code": code})
}

func (s *NodeServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/"+s.name:
		s.get(w)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes" && q.Get("watch") == "true" &&
		q.Get("fieldSelector") == "metadata.name="+s.name:
		s.watch(w, r)
	default:
		status(w, http.StatusNotFound, "not found: "+r.Method+" "+r.URL.RequestURI())
	}
}

func (s *NodeServer) get(w http.ResponseWriter) {
	s.mu.Lock()
	s.gets++
	code := 0
	if len(s.failGets) > 0 {
		code, s.failGets = s.failGets[0], s.failGets[1:]
	}
	n := s.node()
	s.mu.Unlock()
	if code != 0 {
		status(w, code, "injected failure")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(n)
}

// watch streams the Node: its current version first if it is newer than the watch's
// resourceVersion, then one MODIFIED event per change, until the client or the test ends.
func (s *NodeServer) watch(w http.ResponseWriter, r *http.Request) {
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	s.mu.Lock()
	s.watches++
	forbid, expire := s.forbidWatch, s.expire
	s.expire = false
	s.mu.Unlock()
	if forbid {
		status(w, http.StatusForbidden, `nodes "`+s.name+`" is forbidden: User "u" cannot watch resource "nodes"`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if expire {
		_ = enc.Encode(map[string]any{"type": "ERROR", "object": map[string]any{"kind": "Status", "code": http.StatusGone,
			"reason": "Expired", "message": "too old resource version"}})
		flush()
		return
	}
	s.mu.Lock()
	s.open++
	end := s.end
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.open--
		s.mu.Unlock()
	}()
	flush()
	for {
		s.mu.Lock()
		rv, n, changed := s.rv, s.node(), s.changed
		s.mu.Unlock()
		if rv > from {
			if err := enc.Encode(map[string]any{"type": "MODIFIED", "object": n}); err != nil {
				return
			}
			flush()
			from = rv
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-end:
			return
		case <-s.done:
			return
		}
	}
}
