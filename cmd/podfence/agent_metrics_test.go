package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/kube/authz"
	"github.com/podfence/podfence/internal/kube/authz/authztest"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// TestAgentMetricsAuthFlags: --metrics-auth is kubernetes unless told; none is refused on an
// address other than loopback (the DaemonSet's node IP), naming the flags, the values and
// what is allowed; other values are refused.
func TestAgentMetricsAuthFlags(t *testing.T) {
	cmd := newAgentCmd()
	if got := cmd.Flags().Lookup("metrics-auth").Value.String(); got != "kubernetes" {
		t.Errorf("--metrics-auth default %q, want kubernetes", got)
	}
	const want = `flag --metrics-auth=none with --metrics-address "10.0.0.5:9464": unauthenticated metrics are served on a ` +
		"loopback address only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT); use --metrics-auth=kubernetes"
	if err := cmd.Flags().Parse([]string{"--metrics-auth", "none", "--metrics-address", "10.0.0.5:9464"}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.RunE(cmd, nil); err == nil || err.Error() != want {
		t.Errorf("--metrics-auth none on the node IP: error %v\nwant %s", err, want)
	}
	env := map[string]string{"PODFENCE_METRICS_AUTH": "none", "PODFENCE_METRICS_ADDRESS": ":9464"}
	cmd = newAgentCmd()
	if err := cliflags.FromEnv(cmd.Flags(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if err := cmd.RunE(cmd, nil); err == nil || !strings.HasPrefix(err.Error(), `flag --metrics-auth=none with --metrics-address ":9464": `) {
		t.Errorf("PODFENCE_METRICS_AUTH=none on all addresses: error %v", err)
	}
	err := newAgentCmd().Flags().Parse([]string{"--metrics-auth", "basic"})
	if want := `invalid argument "basic" for "--metrics-auth" flag: want kubernetes (bearer tokens reviewed by the API server) ` +
		"or none (loopback addresses only)"; err == nil || err.Error() != want {
		t.Errorf("--metrics-auth basic: error %v\nwant %s", err, want)
	}
}

// TestAgentMetricsNeedAToken runs `podfence agent` with its defaults for metrics (HTTPS, tokens
// reviewed by the API server of --kubeconfig, a fake one here): /metrics and /state answer
// 401 without a token and 403 to a user without RBAC, /healthz anyone. `podfence status`
// reads /state with --token-file and, refused, falls back to the checkpoint; it verifies the
// agent with --ca-file, and sends no token unverified to another machine.
func TestAgentMetricsNeedAToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // the fake API server only, never a real pod's
	api := authztest.New(t)
	api.User("prom-token", "system:serviceaccount:monitoring:prometheus", "/metrics")
	api.User("ops-token", "ops", "/metrics", "/state")
	dir := nritest.ShortDir(t)
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), statusPools)
	write(t, filepath.Join(dir, "ops-token"), "ops-token\n")
	write(t, filepath.Join(dir, "prom-token"), "prom-token\n")
	socket, sysfs := filepath.Join(dir, "nri.sock"), "../../internal/cpu/topology/testdata/sysfs/single-socket-smt-adjacent"
	nritest.StartRuntime(t, socket)
	logs := &syncBuffer{}
	cmd := newAgentCmd()
	cmd.SetArgs([]string{"--nri-socket", socket, "--pools", filepath.Join(dir, "poolconfig-a.yaml"), "--node-name", "node-a",
		"--checkpoint-dir", filepath.Join(dir, "checkpoint"), "--sysfs", sysfs, "--cgroup-root", cgroupstest.Tree(t, "v2"),
		"--device-plugin-dir", "", "--start-binary", "/bin/true", "--vm-runtimes", "", "--events=false", "--publish-node-info=false",
		"--metrics-address", "127.0.0.1:0", "--health-address", "127.0.0.1:0", "--kubeconfig", api.Kubeconfig(t, dir)})
	cmd.SetErr(logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v\n%s", err, logs)
		}
	}()
	addr := waitLog(t, logs, regexp.MustCompile(`msg="serving metrics" address=(\S+) scheme=https auth=kubernetes certificate=self-signed`))

	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		path, token string
		code        int
		want        string
	}{
		{"/metrics", "", 401, "Unauthorized"},
		{"/state", "", 401, "Unauthorized"},
		{"/state", "prom-token", 403, `Forbidden: user "system:serviceaccount:monitoring:prometheus" may not get /state`},
		{"/metrics", "prom-token", 200, "podfence_pool_cpus"},
		{"/healthz", "", 200, "ok"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("GET %s with token %q: %d %.200q, want %d %q", tc.path, tc.token, resp.StatusCode, b, tc.code, tc.want)
		}
	}
	// The kubelet's probes: plain HTTP on the health listener, no token.
	health := waitLog(t, logs, regexp.MustCompile(`msg="serving health" address=(\S+) scheme=http paths="/healthz /readyz"`))
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := map[string]string{"/healthz": "200 ok\n", "/readyz": "200 ok\n", "/metrics": "404 404 page not found\n"}[path]
		if got := fmt.Sprintf("%d %s", resp.StatusCode, b); got != want {
			t.Errorf("GET %s on the health listener %s: %q, want %q", path, health, got, want)
		}
	}
	if n := api.Calls(authz.TokenReviewPath); n != 2 {
		t.Errorf("%d TokenReviews, want 2 (prom-token once, then cached; none without a token)", n)
	}

	text := runCmd(t, "status", "--address", addr, "--timeout", noTimeout, "--token-file", filepath.Join(dir, "ops-token"))
	if !strings.Contains(text, "From: agent (") {
		t.Errorf("status with ops's token: not from the agent:\n%s", text)
	}
	caFile := filepath.Join(dir, "ca.crt") // the API server's: not the agent's
	err := runStatus(t.Context(), io.Discard, io.Discard, statusFlags{address: addr, output: "text", caFile: caFile,
		tokenFile: filepath.Join(dir, "ops-token"), timeout: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("status with a CA that did not sign the agent's certificate: %v", err)
	}
	err = runStatus(t.Context(), io.Discard, io.Discard, statusFlags{address: "192.0.2.1:9464", output: "text",
		tokenFile: filepath.Join(dir, "ops-token"), timeout: time.Hour})
	if want := `agent address "192.0.2.1:9464" is not on this machine: give --ca-file to verify the agent before its certificate ` +
		"gets the token"; err == nil || err.Error() != want {
		t.Errorf("status with a token to another machine, unverified: %v\nwant %s", err, want)
	}

	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"status", "--address", addr, "--timeout", noTimeout, "--token-file", filepath.Join(dir, "prom-token"),
		"--checkpoint-dir", filepath.Join(dir, "checkpoint"), "--pools", filepath.Join(dir, "poolconfig-a.yaml"), "--sysfs", sysfs,
		"--node-name", "node-a"})
	root.SetOut(&out)
	root.SetErr(&errOut)
	if err := root.Execute(); err != nil {
		t.Fatalf("status with prometheus's token: %v\n%s", err, errOut.String())
	}
	if want := "podfence status: the agent refused to show its state (GET https://" + addr + "/state: 403 Forbidden: Forbidden: " +
		`user "system:serviceaccount:monitoring:prometheus" may not get /state); reading its checkpoint`; !strings.Contains(
		errOut.String(), want) || !strings.Contains(out.String(), "From: checkpoint ") {
		t.Errorf("status with prometheus's token: stderr %q, want %q; stdout:\n%s", errOut.String(), want, out.String())
	}
}

// TestAgentMetricsWithoutAPIServer: kubernetes authentication needs an API server: outside a
// pod and without --kubeconfig the agent does not start, and says what to give.
func TestAgentMetricsWithoutAPIServer(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	dir := nritest.ShortDir(t)
	write(t, filepath.Join(dir, "poolconfig-a.yaml"), statusPools)
	cmd := newAgentCmd()
	cmd.SetArgs([]string{"--nri-socket", filepath.Join(dir, "nri.sock"), "--pools", filepath.Join(dir, "poolconfig-a.yaml"),
		"--node-name", "node-a", "--checkpoint-dir", filepath.Join(dir, "checkpoint"),
		"--sysfs", "../../internal/cpu/topology/testdata/sysfs/single-socket-smt-adjacent", "--cgroup-root", "",
		"--device-plugin-dir", "", "--start-binary", "/bin/true", "--vm-runtimes", "", "--metrics-address", "127.0.0.1:0",
		"--health-address", "127.0.0.1:0"})
	cmd.SetErr(io.Discard)
	const want = "flag --metrics-auth=kubernetes: no API server to review tokens (not in a pod and no --kubeconfig); give " +
		"--kubeconfig, or --metrics-auth=none with a loopback --metrics-address"
	if err := cmd.ExecuteContext(t.Context()); err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}
