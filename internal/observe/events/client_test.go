package events_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/kube/kubeapi"
	"github.com/podfence/podfence/internal/observe/events"
)

// apiServer is a TLS server that takes events as the API server does.
type apiServer struct {
	*httptest.Server
	mu     sync.Mutex
	auth   []string
	events []corev1.Event
	paths  []string
	status int // answer; 0 is 201
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev corev1.Event
		err := json.NewDecoder(r.Body).Decode(&ev)
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.paths = append(s.paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		s.events = append(s.events, ev)
		code := s.status
		s.mu.Unlock()
		if err != nil {
			code = http.StatusBadRequest
		}
		if code == 0 {
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(ev)
			return
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w,
			`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"events is forbidden: User \"system:serviceaccount:x:y\" `+
				`cannot create resource \"events\"","code":403}`)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake of TestClientErrors
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

func TestClientPost(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	write(t, tokenFile, "tok-1\n")
	c := events.NewClient(apiClient(t, kubeapi.Config{Host: srv.URL, CAData: srv.caPEM(), TokenFile: tokenFile}), "podfence-agent", "node-a")
	at := time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC)
	e := events.Event{Namespace: "shop", Pod: "web", PodUID: "uid-1", Container: "app", Type: events.Warning,
		Reason: "NotEnoughCPUs", Message: strings.Repeat("x", 2000)}
	if err := c.Post(context.Background(), e, at); err != nil {
		t.Fatal(err)
	}
	write(t, tokenFile, "tok-2") // rotated
	if err := c.Post(context.Background(), e, at); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if got := strings.Join(srv.auth, ","); got != "Bearer tok-1,Bearer tok-2" {
		t.Errorf("Authorization %q", got)
	}
	if srv.paths[0] != "POST /api/v1/namespaces/shop/events application/json" {
		t.Errorf("request %q", srv.paths[0])
	}
	ev := srv.events[0]
	ref := ev.InvolvedObject
	if !strings.HasPrefix(ev.Name, "web.") || ev.Namespace != "shop" ||
		ref.Kind != "Pod" || ref.Name != "web" || ref.Namespace != "shop" || ref.UID != "uid-1" || ref.FieldPath != "spec.containers{app}" ||
		ev.Type != "Warning" || ev.Reason != "NotEnoughCPUs" || len(ev.Message) != 1024 || !strings.HasSuffix(ev.Message, "...") ||
		ev.Source.Component != "podfence-agent" || ev.Source.Host != "node-a" || ev.Count != 1 ||
		!ev.FirstTimestamp.Time.Equal(at) || !ev.LastTimestamp.Time.Equal(at) {
		t.Errorf("event %+v", ev)
	}
}

func TestClientErrors(t *testing.T) {
	srv := newAPIServer(t)
	srv.status = http.StatusForbidden
	c := events.NewClient(apiClient(t, kubeapi.Config{Host: srv.URL, CAData: srv.caPEM(), Token: "t"}), "podfence-agent", "n")
	err := c.Post(context.Background(), events.Event{Namespace: "ns", Pod: "p"}, time.Now())
	if err == nil || err.Error() != `post event: POST /api/v1/namespaces/ns/events: 403 Forbidden: events is forbidden: User `+
		`"system:serviceaccount:x:y" cannot create resource "events"` {
		t.Errorf("error %v", err)
	}
	untrusted := events.NewClient(apiClient(t, kubeapi.Config{Host: srv.URL}), "podfence-agent", "n")
	if err := untrusted.Post(context.Background(), events.Event{Namespace: "ns", Pod: "p"}, time.Now()); err == nil ||
		!strings.Contains(err.Error(), "certificate") {
		t.Errorf("unverified server: error %v", err)
	}
	missing := events.NewClient(apiClient(t, kubeapi.Config{Host: "https://h", TokenFile: filepath.Join(t.TempDir(), "none")}), "c", "h")
	if err := missing.Post(context.Background(), events.Event{}, time.Now()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing token: %v", err)
	}
}

// apiClient is a kubeapi client for cfg; its own errors are kubeapi's tests.
func apiClient(t *testing.T, cfg kubeapi.Config) *kubeapi.Client {
	t.Helper()
	c, err := kubeapi.New(cfg, "podfence-agent")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
