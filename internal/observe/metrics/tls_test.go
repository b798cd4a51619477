package metrics_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/kube/authz/authztest"
	"github.com/podfence/podfence/internal/observe/metrics"
)

// metricsName is the DNS name of the agents' metrics certificate (deploy/cert-manager),
// which a scraper verifies with server_name: the agents serve on their nodes' IPs.
const metricsName = "podfence-agent-metrics"

// testCA is a CA that issues serving certificates for metricsName.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podfence-webhook-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert, key, pool}
}

// issue writes a serving certificate for metricsName (serial) and its key into dir as
// tls.crt and tls.key, each written aside and renamed over the old one, as the kubelet
// updates a Secret volume.
func (ca *testCA) issue(t *testing.T, dir string, serial int64) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: metricsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{metricsName},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePEM(t, certFile+".new", "CERTIFICATE", der)
	writePEM(t, keyFile+".new", "PRIVATE KEY", pkcs8)
	for _, f := range []string{keyFile, certFile} {
		if err := os.Rename(f+".new", f); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// verified fetches /metrics as a scraper that verifies the agent: the CA's pool and the
// name metricsName (Prometheus: tls_config ca_file and server_name), and returns the serial
// number of the certificate served.
func verified(t *testing.T, ca *testCA, addr string) (int, int64, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: metricsName}}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer prom-token")
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.TLS.PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestVerifiedScrape: with --metrics-cert and --metrics-key from the CA, a scraper that
// verifies the certificate (CA, server name) reads /metrics; one that trusts another CA is
// refused at the handshake. A renewed certificate (the Secret's files replaced) is served
// from the next connection on, without a restart.
func TestVerifiedScrape(t *testing.T) {
	api := authztest.New(t)
	api.User("prom-token", "prometheus", "/metrics")
	ca := newCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.issue(t, dir, 100)
	srv := guarded(t, api, metrics.Security{CertFile: certFile, KeyFile: keyFile}, noTimeout)
	addr := srv.Addr().String()
	if code, serial, err := verified(t, ca, addr); err != nil || code != 200 || serial != 100 {
		t.Fatalf("verified scrape: %d, certificate %d, %v; want 200 with certificate 100", code, serial, err)
	}
	if _, _, err := verified(t, newCA(t), addr); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("a scraper trusting another CA: %v, want the handshake refused", err)
	}
	ca.issue(t, dir, 101) // cert-manager renewed it
	if code, serial, err := verified(t, ca, addr); err != nil || code != 200 || serial != 101 {
		t.Errorf("after renewal: %d, certificate %d, %v; want 200 with certificate 101", code, serial, err)
	}
	// A broken renewal (a key that does not match) keeps the last good certificate.
	other := t.TempDir()
	_, otherKey := ca.issue(t, other, 102)
	if err := os.Rename(otherKey, keyFile); err != nil {
		t.Fatal(err)
	}
	if code, serial, err := verified(t, ca, addr); err != nil || code != 200 || serial != 101 {
		t.Errorf("with a mismatched key: %d, certificate %d, %v; want 200 with certificate 101 still", code, serial, err)
	}
}

// TestCertificateFIFO: a named pipe (nothing writes to it) as --metrics-cert is refused at
// start with an error naming it.
func TestCertificateFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tls.crt")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := metrics.Listen("127.0.0.1:0", nil, nil, metrics.WithSecurity(metrics.Security{Auth: metrics.AuthKubernetes,
		Guard: func(h http.Handler) http.Handler { return h }, CertFile: p, KeyFile: p}))
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Errorf("Listen with a FIFO certificate: %v, want an error naming %s, not a regular file", err, p)
	}
}
