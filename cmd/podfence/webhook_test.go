package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cliflags"
)

func TestWebhookFlagsFromEnv(t *testing.T) {
	env := map[string]string{"PODFENCE_TLS_CERT": "/tls/tls.crt", "PODFENCE_CORESCHED_PROFILES": "/etc/p.yaml", "PODFENCE_MAX_INFLIGHT": "4"}
	cmd := newWebhookCmd()
	if err := cmd.Flags().Parse([]string{"--listen", ":9443"}); err != nil {
		t.Fatal(err)
	}
	if err := cliflags.FromEnv(cmd.Flags(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{"tls-cert": "/tls/tls.crt", "coresched-profiles": "/etc/p.yaml", "listen": ":9443",
		"reload-interval": "10s", "max-inflight": "4", "max-inflight-bytes": "3145728", "inflight-wait": "1s"} {
		if got := cmd.Flags().Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s %q, want %q", flag, got, want)
		}
	}
}

func TestWebhookRefusesBadFlags(t *testing.T) {
	limits := func(n int, bytes int64, wait time.Duration) webhookFlags {
		return webhookFlags{certFile: "c", keyFile: "k", maxInFlight: n, maxInFlightBytes: bytes, inFlightWait: wait,
			log: cliflags.Log{Level: "info", Format: "json"}}
	}
	for _, tc := range []struct {
		f   webhookFlags
		err string
	}{
		{f: webhookFlags{log: cliflags.Log{Level: "loud", Format: "text"}}, err: `flag --log-level "loud": want debug, info, warn or error`},
		{f: webhookFlags{log: cliflags.Log{Level: "info", Format: "xml"}}, err: `flag --log-format "xml": want text or json`},
		{f: webhookFlags{log: cliflags.Log{Level: "info", Format: "json"}},
			err: "flags --tls-cert and --tls-key are required: the API server calls webhooks over HTTPS only"},
		{f: limits(0, 1, time.Second), err: "flag --max-inflight 0: want at least 1"},
		{f: limits(1, -1, time.Second), err: "flag --max-inflight-bytes -1: want at least 1"},
		{f: limits(1, 1, 0), err: "flag --inflight-wait 0s: want a duration above 0, such as 1s"},
	} {
		if err := runWebhook(t.Context(), tc.f, nil); err == nil || err.Error() != tc.err {
			t.Errorf("error %v, want %s", err, tc.err)
		}
	}
}

// TestWebhookRuns starts the webhook on a loopback port and stops it.
func TestWebhookRuns(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeTestCert(t, certFile, keyFile)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var log bytes.Buffer
	err := runWebhook(ctx, webhookFlags{listen: "127.0.0.1:0", certFile: certFile, keyFile: keyFile,
		reload: time.Second, maxInFlight: 2, maxInFlightBytes: 1 << 20, inFlightWait: time.Second,
		log: cliflags.Log{Level: "info", Format: "json"}}, &log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), `"msg":"serving"`) || !strings.Contains(log.String(), `"maxInFlight":2,"maxInFlightBytes":1048576`) {
		t.Errorf("log without the serving line:\n%s", log.String())
	}
}

func writeTestCert(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "podfence-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}
