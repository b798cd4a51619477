package metrics_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/kube/authz"
	"github.com/podfence/podfence/internal/kube/authz/authztest"
	"github.com/podfence/podfence/internal/observe/metrics"
)

// noTimeout is the guard's review timeout where the test expects the API server's answer:
// longer than any test run, so that a loaded machine gets the same answer as an idle one.
const noTimeout = time.Hour

// guarded serves a registry with a gauge and a state behind the API server api, whose
// reviews the guard waits for at most timeout.
func guarded(t *testing.T, api *authztest.APIServer, sec metrics.Security, timeout time.Duration) *metrics.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "podfence_test_gauge", Help: "A test gauge."})
	g.Set(7)
	reg.MustRegister(g)
	sec.Auth = metrics.AuthKubernetes
	sec.Guard = authz.New(api.Client(t), authz.Options{Timeout: timeout}, slog.New(slog.DiscardHandler)).Wrap
	srv, err := metrics.Listen("127.0.0.1:0", reg, slog.New(slog.DiscardHandler), metrics.WithSecurity(sec),
		metrics.WithState(func() any { return map[string]string{"node": "node-a"} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(t.Context()) })
	return srv
}

// client trusts no certificate (the server's is self-signed): an encrypted channel, as
// Prometheus's insecure_skip_verify gives.
var client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

func fetchAs(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestAuthKubernetes: /metrics and /state need a token the API server knows, of a user RBAC
// allows get on the path; a scrape repeated within the cache time makes no API call;
// /healthz and /readyz answer anyone; all over HTTPS only.
func TestAuthKubernetes(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "system:serviceaccount:monitoring:prometheus", "/metrics")
	api.User("ops-token", "ops", "/metrics", "/state")
	api.User("dev-token", "dev")
	srv := guarded(t, api, metrics.Security{}, noTimeout)
	base := "https://" + srv.Addr().String()
	for _, tc := range []struct {
		name, path, token string
		code              int
		want              string
	}{
		{"no token", "/metrics", "", 401, "Unauthorized: no bearer token\n"},
		{"no token, state", "/state", "", 401, "Unauthorized"},
		{"unknown token", "/metrics", "made-up", 401, "Unauthorized: the API server does not accept the token\n"},
		{"no RBAC", "/metrics", "dev-token", 403, "Forbidden: user \"dev\" may not get /metrics\n"},
		{"prometheus", "/metrics", "prom-token", 200, "podfence_test_gauge 7\n"},
		{"prometheus, not /state", "/state", "prom-token", 403, "Forbidden"},
		{"ops, state", "/state", "ops-token", 200, `"node": "node-a"`},
		{"healthz without a token", "/healthz", "", 200, "ok\n"},
		{"readyz without a token", "/readyz", "", 200, "ok\n"},
	} {
		if code, body := fetchAs(t, base+tc.path, tc.token); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: GET %s: %d %.200q, want %d %q", tc.name, tc.path, code, body, tc.code, tc.want)
		}
	}
	calls := api.Calls(authz.TokenReviewPath) + api.Calls(authz.SubjectAccessReviewPath)
	for range 3 { // scrapes
		if code, _ := fetchAs(t, base+"/metrics", "prom-token"); code != 200 {
			t.Errorf("scrape: %d", code)
		}
	}
	if n := api.Calls(authz.TokenReviewPath) + api.Calls(authz.SubjectAccessReviewPath); n != calls {
		t.Errorf("3 scrapes made %d API calls, want none (cached)", n-calls)
	}
	resp, err := http.Get("http://" + srv.Addr().String() + "/metrics") // plain HTTP: no answer but 400
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: %d, want 400", resp.StatusCode)
	}
}

// TestAuthReadyz: with AuthKubernetes, the open /readyz tells ok or not ready, not why.
func TestAuthReadyz(t *testing.T) {
	h := metrics.Handler(prometheus.NewRegistry(), metrics.WithReady(func() error { return errors.New("runtime not synchronised") }),
		metrics.WithSecurity(metrics.Security{Auth: metrics.AuthKubernetes, Guard: func(h http.Handler) http.Handler { return h }}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	if code, body := get(t, srv.URL+"/readyz"); code != 503 || body != "not ready\n" {
		t.Errorf("/readyz: %d %q, want 503 \"not ready\\n\"", code, body)
	}
}

// TestAuthAPIServerDown: with the API server hanging, a scrape answers 503 once the review
// timeout has passed (the answer itself shows the guard did not wait for the API server);
// the probes are not affected.
func TestAuthAPIServerDown(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "prometheus", "/metrics")
	const timeout = 200 * time.Millisecond
	srv := guarded(t, api, metrics.Security{}, timeout)
	base := "https://" + srv.Addr().String()
	api.Hang(true)
	start := time.Now()
	if code, body := fetchAs(t, base+"/metrics", "prom-token"); code != 503 {
		t.Errorf("API server hanging: %d %q, want 503", code, body)
	}
	if d := time.Since(start); d < timeout {
		t.Errorf("answered after %s, before the review timeout %s", d, timeout)
	}
	if code, _ := fetchAs(t, base+"/healthz", ""); code != 200 {
		t.Errorf("/healthz with the API server hanging: %d", code)
	}
}

// TestAuthCertificate: --metrics-cert and --metrics-key are served; without them, a
// self-signed certificate for the address; one without the other is refused.
func TestAuthCertificate(t *testing.T) {
	api := authztest.New(t)
	srv := guarded(t, api, metrics.Security{}, noTimeout)
	leaf := serverCert(t, srv.Addr().String())
	selfSigned := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil
	if leaf.Subject.CommonName != "podfence-agent" || !selfSigned || time.Until(leaf.NotAfter) < 300*24*time.Hour {
		t.Errorf("self-signed certificate: %s, issuer %s, until %s", leaf.Subject, leaf.Issuer, leaf.NotAfter)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("self-signed certificate: %v", err)
	}

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	der := api.Certificate().Raw // any certificate with its key: the fake API server's
	key, err := x509.MarshalPKCS8PrivateKey(api.TLS.Certificates[0].PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", key)
	srv = guarded(t, api, metrics.Security{CertFile: certFile, KeyFile: keyFile}, noTimeout)
	if got := serverCert(t, srv.Addr().String()); !got.Equal(api.Certificate()) {
		t.Errorf("served %s, want the certificate of --metrics-cert", got.Subject)
	}

	_, err = metrics.Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		metrics.WithSecurity(metrics.Security{Auth: metrics.AuthKubernetes, Guard: func(h http.Handler) http.Handler { return h },
			CertFile: certFile}))
	if err == nil || err.Error() != "flags --metrics-cert and --metrics-key: give both or neither" {
		t.Errorf("certificate without a key: %v", err)
	}
}

// TestCheckAuth: --metrics-auth=none serves loopback addresses only, and Listen refuses the
// others, naming the flags, the values and what is allowed.
func TestCheckAuth(t *testing.T) {
	for _, tc := range []struct {
		auth    metrics.Auth
		address string
		ok      bool
	}{
		{metrics.AuthNone, "127.0.0.1:9464", true},
		{metrics.AuthNone, "localhost:9464", true},
		{metrics.AuthNone, "[::1]:9464", true},
		{"", "127.0.0.2:0", true},
		{metrics.AuthNone, "10.0.0.5:9464", false},
		{metrics.AuthNone, ":9464", false},
		{metrics.AuthNone, "0.0.0.0:9464", false},
		{"", "node-a:9464", false},
		{metrics.AuthKubernetes, "10.0.0.5:9464", true},
		{metrics.AuthKubernetes, ":9464", true},
	} {
		err := metrics.CheckAuth(tc.auth, tc.address)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAuth(%q, %q) = %v, want ok %v", tc.auth, tc.address, err, tc.ok)
		}
	}
	const want = `flag --metrics-auth=none with --metrics-address "0.0.0.0:0": unauthenticated metrics are served on a ` +
		"loopback address only (127.0.0.1:PORT, [::1]:PORT or localhost:PORT); use --metrics-auth=kubernetes"
	for _, auth := range []metrics.Auth{"", metrics.AuthNone} {
		_, err := metrics.Listen("0.0.0.0:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
			metrics.WithSecurity(metrics.Security{Auth: auth}))
		if err == nil || err.Error() != want {
			t.Errorf("Listen with auth %q on 0.0.0.0: %v\nwant %s", auth, err, want)
		}
	}
	_, err := metrics.Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		metrics.WithSecurity(metrics.Security{Auth: metrics.AuthKubernetes}))
	if err == nil {
		t.Error("kubernetes without a reviewer: served")
	}
	var a metrics.Auth
	if err := a.Set("basic"); err == nil || a != "" {
		t.Errorf("Set(basic) = %v, %q", err, a)
	}
}

// serverCert is the certificate the server at address shows.
func serverCert(t *testing.T, address string) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", address, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
