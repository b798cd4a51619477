package nodeagent

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAPIClient: one client for Events and node info, from a kubeconfig or the pod; a
// kubeconfig that cannot be read stops the agent only when Events need it.
func TestAPIClient(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	dir := t.TempDir()
	good, missing := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "none")
	text := "{current-context: c, contexts: [{name: c, context: {cluster: k, user: u}}], " +
		"clusters: [{name: k, cluster: {server: 'https://api.example:6443'}}], users: [{name: u, user: {token: t}}]}"
	if err := os.WriteFile(good, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      Config
		client   bool
		err, log string
	}{
		{name: "neither wanted", cfg: Config{Kubeconfig: missing}},
		{name: "not in a pod", cfg: Config{Events: true, PublishNode: true}, log: "not in a pod and no kubeconfig given"},
		{name: "kubeconfig", cfg: Config{Events: true, PublishNode: true, Kubeconfig: good}, client: true,
			log: "server=https://api.example:6443"},
		{name: "node info only", cfg: Config{PublishNode: true, Kubeconfig: good}, client: true},
		{name: "bad kubeconfig, Events on", cfg: Config{Events: true, Kubeconfig: missing},
			err: "API server (" + missing + "): kubeconfig: open " + missing + ": no such file or directory"},
		{name: "bad kubeconfig, node info only", cfg: Config{PublishNode: true, Kubeconfig: missing},
			log: "level=WARN msg=\"no API server: Kubernetes Events and node info off\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c, err := apiClient(tc.cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if (c != nil) != tc.client || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
				t.Errorf("apiClient = %v, %v; want a client %v, error %q", c, err, tc.client, tc.err)
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q, want %q in it", logs.String(), tc.log)
			}
		})
	}
}
