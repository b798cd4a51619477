package events_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/observe/events"
)

// TestInCluster: outside a pod, the error the agent turns Events off on.
func TestInCluster(t *testing.T) {
	if _, err := events.InCluster(t.TempDir(), func(string) string { return "" }); !errors.Is(err, events.ErrNotInCluster) {
		t.Errorf("outside a pod: %v", err)
	}
}

// TestKubeconfig: the current context's server, CA and token, with relative paths, reach
// a TLS API server.
func TestKubeconfig(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ca.pem"), string(srv.caPEM()))
	write(t, filepath.Join(dir, "tok"), "secret")
	path := filepath.Join(dir, "kubeconfig")
	write(t, path, `apiVersion: v1
kind: Config
current-context: test
contexts:
- {name: other, context: {cluster: nowhere, user: nobody}}
- {name: test, context: {cluster: local, user: agent}}
clusters:
- {name: local, cluster: {server: "`+srv.URL+`", certificate-authority: ca.pem}}
users:
- {name: agent, user: {tokenFile: tok}}
`)
	cfg, err := events.Kubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := events.NewClient(cfg, "podfence-agent", "n")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Post(context.Background(), events.Event{Namespace: "ns", Pod: "p", Reason: "R"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.auth[0] != "Bearer secret" {
		t.Errorf("Authorization %q", srv.auth[0])
	}
}
