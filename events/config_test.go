package events_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/events"
)

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ca.crt"), "CA")
	write(t, filepath.Join(dir, "token"), "tok")
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
	cfg, err := events.InCluster(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00::1]:443" || string(cfg.CAData) != "CA" || cfg.TokenFile != filepath.Join(dir, "token") {
		t.Errorf("config %+v", cfg)
	}
	if _, err := events.InCluster(dir, func(string) string { return "" }); !errors.Is(err, events.ErrNotInCluster) {
		t.Errorf("outside a pod: %v", err)
	}
	os.Remove(filepath.Join(dir, "token"))
	if _, err := events.InCluster(dir, func(k string) string { return env[k] }); err == nil || !strings.HasPrefix(err.Error(), "in-cluster config: stat ") {
		t.Errorf("no token: %v", err)
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

func TestKubeconfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{name: "no context", text: "current-context: x\n", want: `current-context "x": no such context`},
		{name: "no cluster", text: "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n", want: `context "x": no cluster "c"`},
		{name: "exec", text: "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n" +
			"clusters: [{name: c, cluster: {server: 'https://h'}}]\nusers: [{name: u, user: {exec: {command: aws}}}]\n",
			want: `user "u": exec plugins and auth providers are not supported; give a token or a client certificate`},
		{name: "missing CA", text: "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n" +
			"clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: none.pem}}]\n",
			want: `cluster "c": open ` + filepath.Join(dir, "none.pem") + `: no such file or directory`},
		{name: "not YAML", text: "[", want: "error converting YAML to JSON"},
	} {
		path := filepath.Join(dir, "kubeconfig")
		write(t, path, tc.text)
		_, err := events.Kubeconfig(path)
		if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig "+path+": "+tc.want) {
			t.Errorf("%s: error %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := events.Kubeconfig(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
