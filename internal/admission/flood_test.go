package admission

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/podfence/podfence/internal/testwait"
)

// TestConnectionsBoundedPerSource: one source cannot hold more than Connections.PerSource
// connections to the webhook (more are closed at once, before TLS), and the kubelet's probe
// and the API server from other sources are still served.
func TestConnectionsBoundedPerSource(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "webhook")
	addr := startServeLog(t, Options{CertFile: certFile, KeyFile: keyFile}, discardLog())
	from := func(ip string) *net.Dialer { return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}} }
	cfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}
	held, refused := 0, 0
	for range Connections.PerSource + 8 {
		c, err := tls.DialWithDialer(from("127.0.0.2"), "tcp", addr, cfg) // the handshake completes on a held one
		if err != nil {
			refused++
			continue
		}
		defer c.Close()
		held++
	}
	if held != Connections.PerSource || refused != 8 {
		t.Errorf("one source: %d connections held, %d refused; want %d held, 8 refused", held, refused, Connections.PerSource)
	}
	tr := &http.Transport{DialContext: from("127.0.0.3").DialContext, TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true}
	c := &http.Client{Transport: tr, Timeout: testwait.Timeout}
	resp, err := c.Get("https://" + addr + PathHealthz)
	if err != nil {
		t.Fatalf("probe from another source while one holds %d: %v", held, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("probe from another source: %d %q; want 200", resp.StatusCode, b)
	}
}
