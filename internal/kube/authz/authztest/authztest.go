// Package authztest is a fake API server answering TokenReviews and SubjectAccessReviews
// with their real JSON, for the tests of what package authz guards. It is imported from
// _test.go files only.
package authztest

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"

	"github.com/podfence/podfence/internal/kube/authz"
	"github.com/podfence/podfence/internal/kube/kubeapi"
)

// AgentToken is the token the client of Client and Kubeconfig shows: the API server
// answers reviews only for it (anything else is 403, as for a service account without
// RBAC for tokenreviews and subjectaccessreviews).
const AgentToken = "agent-token"

// APIServer is a TLS API server knowing some tokens and which of their users may get
// which non-resource paths. Its fields may be changed between requests.
type APIServer struct {
	*httptest.Server
	mu      sync.Mutex
	users   map[string]string              // token: user name
	allowed map[string]map[string]struct{} // user: paths allowed with verb get
	calls   map[string]int                 // API path: requests
	hang    chan struct{}                  // non-nil: requests wait until it is closed
}

// New starts an API server closed at the end of the test.
func New(t testing.TB) *APIServer {
	t.Helper()
	s := &APIServer{users: map[string]string{}, allowed: map[string]map[string]struct{}{}, calls: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	t.Cleanup(func() { s.Hang(false) }) // before Close: let hanging requests go
	return s
}

// User makes token the token of user, allowed to get paths.
func (s *APIServer) User(token, user string, paths ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[token] = user
	if s.allowed[user] == nil {
		s.allowed[user] = map[string]struct{}{}
	}
	for _, p := range paths {
		s.allowed[user][p] = struct{}{}
	}
}

// Hang makes requests wait without an answer (until Hang(false) or the end of the test).
func (s *APIServer) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.hang == nil:
		s.hang = make(chan struct{})
	case !on && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// Calls returns how many requests reached path (TokenReviews: authz.TokenReviewPath).
func (s *APIServer) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// Client returns a client of the server showing AgentToken.
func (s *APIServer) Client(t testing.TB) *kubeapi.Client {
	t.Helper()
	c, err := kubeapi.New(kubeapi.Config{Host: s.URL, CAData: s.CAPEM(), Token: AgentToken}, "authztest")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CAPEM is the server's certificate, PEM-encoded.
func (s *APIServer) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// Kubeconfig writes a kubeconfig file for the server with AgentToken into dir and returns
// its path.
func (s *APIServer) Kubeconfig(t testing.TB, dir string) string {
	t.Helper()
	ca := filepath.Join(dir, "ca.crt")
	path := filepath.Join(dir, "kubeconfig")
	text := fmt.Sprintf("{current-context: c, contexts: [{name: c, context: {cluster: k, user: u}}], "+
		"clusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s'}}], users: [{name: u, user: {token: %s}}]}",
		s.URL, ca, AgentToken)
	if err := os.WriteFile(ca, s.CAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (s *APIServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.URL.Path]++
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+AgentToken {
		status(w, http.StatusForbidden, "forbidden")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		status(w, http.StatusBadRequest, err.Error())
		return
	}
	switch r.URL.Path {
	case authz.TokenReviewPath:
		var tr authnv1.TokenReview
		if err := json.Unmarshal(body, &tr); err != nil || tr.Kind != "TokenReview" || tr.APIVersion != "authentication.k8s.io/v1" {
			status(w, http.StatusBadRequest, fmt.Sprintf("not a TokenReview: %v %s", err, body))
			return
		}
		s.mu.Lock()
		user, ok := s.users[tr.Spec.Token]
		s.mu.Unlock()
		tr.Status = authnv1.TokenReviewStatus{Authenticated: ok}
		if ok {
			tr.Status.User = authnv1.UserInfo{Username: user, UID: "uid-" + user, Groups: []string{"system:authenticated"}}
		} else {
			tr.Status.Error = "invalid bearer token"
		}
		tr.Spec.Token = "" // the API server does not echo it either
		answer(w, tr)
	case authz.SubjectAccessReviewPath:
		var sar authzv1.SubjectAccessReview
		err := json.Unmarshal(body, &sar)
		if err != nil || sar.Kind != "SubjectAccessReview" || sar.Spec.NonResourceAttributes == nil || sar.Spec.ResourceAttributes != nil {
			status(w, http.StatusBadRequest, fmt.Sprintf("not a SubjectAccessReview of a non-resource URL: %v %s", err, body))
			return
		}
		a := sar.Spec.NonResourceAttributes
		s.mu.Lock()
		_, ok := s.allowed[sar.Spec.User][a.Path]
		s.mu.Unlock()
		ok = ok && a.Verb == "get" && sar.Spec.UID == "uid-"+sar.Spec.User
		sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: ok}
		if !ok {
			sar.Status.Reason = "no RBAC policy matched"
		}
		answer(w, sar)
	default:
		status(w, http.StatusNotFound, "not found")
	}
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(v)
}

// status answers with a metav1.Status, as the API server does for errors.
func status(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": msg, "code": code})
}
