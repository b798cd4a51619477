package admission

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/testwait"
)

// scrape returns the webhook's /metrics text.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + PathMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", PathMetrics, resp.StatusCode, err)
	}
	return string(b)
}

// TestCertificateMetrics: /metrics shows the expiry of the certificate in use, follows a
// reload, and counts a failed one (the alert in deploy/prometheus/webhook-alerts.yaml).
func TestCertificateMetrics(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeCert(t, dir, "first")
	addr := startServeLog(t, Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond},
		slog.New(slog.DiscardHandler))
	notAfter := func(unix int64) string {
		return fmt.Sprintf("podfence_webhook_certificate_not_after_seconds %g\n", float64(unix))
	}
	if got := scrape(t, addr); !strings.Contains(got, notAfter(first.NotAfter.Unix())) ||
		!strings.Contains(got, "podfence_webhook_certificate_reload_failures_total 0\n") {
		t.Fatalf("metrics at start:\n%s\nwant %q and no failures", got, notAfter(first.NotAfter.Unix()))
	}
	writeAtomic(t, keyFile, "not a key")
	testwait.Eventually(t, "a failed reload counted", func() bool {
		return !strings.Contains(scrape(t, addr), "podfence_webhook_certificate_reload_failures_total 0\n")
	})
	_, _, second := writeCertUntil(t, dir, "second", first.NotAfter.Add(24*time.Hour))
	testwait.Eventually(t, "the second certificate's expiry", func() bool {
		return strings.Contains(scrape(t, addr), notAfter(second.NotAfter.Unix()))
	})
}
