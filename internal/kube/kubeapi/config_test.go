package kubeapi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/kube/kubeapi"
)

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ca.crt"), "CA")
	write(t, filepath.Join(dir, "token"), "tok")
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
	cfg, err := kubeapi.InCluster(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00::1]:443" || string(cfg.CAData) != "CA" || cfg.TokenFile != filepath.Join(dir, "token") {
		t.Errorf("config %+v", cfg)
	}
	if _, err := kubeapi.InCluster(dir, func(string) string { return "" }); !errors.Is(err, kubeapi.ErrNotInCluster) {
		t.Errorf("outside a pod: %v", err)
	}
	os.Remove(filepath.Join(dir, "token"))
	if _, err := kubeapi.InCluster(dir, func(k string) string { return env[k] }); err == nil || !strings.HasPrefix(err.Error(),
		"in-cluster config: stat ") {
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
	cfg, err := kubeapi.Kubeconfig(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.New(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), "GET", "/api/v1/nodes/n", "", nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.requests(); len(got) != 1 || got[0].auth != "Bearer secret" {
		t.Errorf("requests %+v, want one with the token", got)
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
		_, err := kubeapi.Kubeconfig(path)
		if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig "+path+": "+tc.want) {
			t.Errorf("%s: error %v, want %s", tc.name, err, tc.want)
		}
	}
	if _, err := kubeapi.Kubeconfig(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoad(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := kubeapi.Load(""); !errors.Is(err, kubeapi.ErrNotInCluster) {
		t.Errorf("outside a pod: %v, want ErrNotInCluster", err)
	}
	if _, err := kubeapi.Load(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing kubeconfig: %v", err)
	}
}
