package admission

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podfence/podfence/internal/testwait"
)

// startServeLog runs Serve on a loopback port, logging to log, until the test ends; it
// returns the address.
func startServeLog(t *testing.T, opts Options, log *slog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, opts, log) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	})
	return ln.Addr().String()
}

// servedSerial connects and returns the serial number of the certificate served.
func servedSerial(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// logRecorder is a slog.Handler that keeps the messages logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}

// count returns how many times msg was logged.
func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// countingLoad wraps a LoadConfig and counts its calls: Serve calls it once at start and
// then once per reload tick, after checking the certificate, so a call proves that the
// tick before it has finished.
type countingLoad struct {
	load  func() (*Config, error)
	calls atomic.Int64
}

func (c *countingLoad) Load() (*Config, error) {
	defer c.calls.Add(1)
	return c.load()
}

// nextTicks waits until n reload ticks have run from start to end after this call.
func (c *countingLoad) nextTicks(t *testing.T, n int64) {
	t.Helper()
	// The tick calling Load next may have checked the files before this call; the one
	// after it has not.
	want := c.calls.Load() + n + 1
	testwait.Eventually(t, fmt.Sprintf("%d more reload ticks", n), func() bool { return c.calls.Load() >= want })
}

// TestCertReload rewrites the certificate files under a running server: a broken pair keeps
// the old certificate, a new pair is served without a restart, and clients that trust only
// the new certificate get through.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeCert(t, dir, "first")
	logs := &logRecorder{}
	loads := &countingLoad{load: func() (*Config, error) { return &Config{}, nil }}
	addr := startServeLog(t, Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond,
		LoadConfig: loads.Load}, slog.New(logs))
	if got := servedSerial(t, addr); got != first.SerialNumber.String() {
		t.Fatalf("serial %s, want the first certificate's %s", got, first.SerialNumber)
	}

	writeAtomic(t, keyFile, "not a key")
	// The reload that read the broken key says so; ticks after it keep the first certificate.
	const certErr = "reload certificate: keeping the one served"
	testwait.Eventually(t, "the broken key's error", func() bool { return logs.count(certErr) > 0 })
	loads.nextTicks(t, 2)
	if got := servedSerial(t, addr); got != first.SerialNumber.String() {
		t.Fatalf("serial %s after a broken key: want the first certificate still", got)
	}
	if n := logs.count(certErr); n != 1 {
		t.Errorf("%q logged %d times, want once for one broken key", certErr, n)
	}

	_, _, second := writeCert(t, dir, "second")
	testwait.Eventually(t, "the second certificate", func() bool { return servedSerial(t, addr) == second.SerialNumber.String() })

	pool := x509.NewCertPool()
	pool.AddCert(second)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + PathHealthz)
	if err != nil {
		t.Fatalf("a client trusting the second certificate: %v", err)
	}
	resp.Body.Close()
}

// TestConfigReload changes the profile file under a running server and sees the new
// profile applied; a broken file keeps the old config.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert := writeCert(t, dir, "webhook")
	profiles := filepath.Join(dir, "profiles.yaml")
	if err := os.WriteFile(profiles, []byte("- {namespaces: [a], group: one}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	loads := &countingLoad{load: func() (*Config, error) { return Load("", profiles) }}
	addr := startServeLog(t, Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond,
		LoadConfig: loads.Load}, slog.New(logs))
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	patch := func() string {
		resp, err := client.Post("https://"+addr+PathMutate, "application/json", bytes.NewReader(reviewJSON(t, testPod("a", ctr("c")))))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return string(r.Response.Patch)
	}
	if got := patch(); !strings.Contains(got, `"value":{"podfence.io/core-sched-group":"one"}`) {
		t.Fatalf("patch %s: want group one", got)
	}
	writeAtomic(t, profiles, "- {namespaces: [a], policy: strict}\n")
	// The reload that read the broken file says so; ticks after it keep group one.
	const configErr = "reload config: keeping the one in use"
	testwait.Eventually(t, "the broken profile file's error", func() bool { return logs.count(configErr) > 0 })
	loads.nextTicks(t, 2)
	if got := patch(); !strings.Contains(got, `"one"`) {
		t.Fatalf("patch %s after a broken profile file: want group one still", got)
	}
	writeAtomic(t, profiles, "- {namespaces: [a], group: two}\n")
	testwait.Eventually(t, "group two", func() bool { return strings.Contains(patch(), `"two"`) })
}

// writeAtomic replaces file by a renamed temporary file, so that no reload tick reads it
// half written (an empty profile file is a valid config).
func writeAtomic(t *testing.T, file, content string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func TestServeRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "x")
	for _, tc := range []struct {
		name string
		opts Options
		err  string
	}{
		{name: "no certificate", opts: Options{CertFile: filepath.Join(dir, "none"), KeyFile: keyFile},
			err: "read TLS certificate: open " + dir + "/none: no such file or directory"},
		{name: "a certificate as the key", opts: Options{CertFile: certFile, KeyFile: certFile},
			err: "load TLS key pair " + certFile + ", " + certFile + ": tls: found a certificate rather than a key in the PEM for the private key"},
		{name: "bad config", opts: Options{CertFile: certFile, KeyFile: keyFile,
			LoadConfig: func() (*Config, error) { return nil, errors.New("boom") }},
			err: "webhook config: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			err = Serve(t.Context(), ln, tc.opts, discardLog())
			if errText(err) != tc.err {
				t.Errorf("error %v\nwant  %s", err, tc.err)
			}
			if _, err := ln.Accept(); err == nil {
				t.Error("the listener is still open")
			}
		})
	}
}

// TestServerBounds: the server bounds a request's headers and each phase of a connection.
func TestServerBounds(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "webhook")
	certs, err := NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(http.NotFoundHandler(), certs, Options{}, discardLog())
	if srv.ReadHeaderTimeout != 5*time.Second || srv.ReadTimeout != 15*time.Second || srv.WriteTimeout != 15*time.Second ||
		srv.IdleTimeout != 90*time.Second || srv.MaxHeaderBytes != 64<<10 {
		t.Errorf("ReadHeaderTimeout %s, ReadTimeout %s, WriteTimeout %s, IdleTimeout %s, MaxHeaderBytes %d; want 5s, 15s, 15s, 90s, 65536",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	if srv.TLSConfig.MinVersion != tls.VersionTLS12 || srv.TLSConfig.GetCertificate == nil {
		t.Errorf("TLS config %+v: want TLS 1.2 or later, certificates from the reloader", srv.TLSConfig)
	}
	if lim := (Limits{}).withDefaults(); lim.Timeout >= srv.ReadTimeout || lim.Timeout >= srv.WriteTimeout {
		t.Errorf("review timeout %s: want it under the read and write timeouts", lim.Timeout)
	}
	if s := newServer(http.NotFoundHandler(), certs, Options{IdleTimeout: time.Second}, discardLog()); s.IdleTimeout != time.Second {
		t.Errorf("IdleTimeout %s with Options.IdleTimeout 1s", s.IdleTimeout)
	}
}

// TestIdleConnectionClosed: the server closes a keep-alive connection left idle after an
// answer once IdleTimeout has passed.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 100 * time.Millisecond
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "webhook")
	addr := startServeLog(t, Options{CertFile: certFile, KeyFile: keyFile, IdleTimeout: idle}, discardLog())
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // no ALPN: HTTP/1.1
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The failure bound: a connection never closed fails the test rather than hanging it.
	if err := conn.SetReadDeadline(testwait.Deadline(t)); err != nil {
		t.Fatal(err)
	}
	sent := time.Now() // the idle time starts after the answer, later than this
	if _, err := io.WriteString(conn, "GET "+PathHealthz+" HTTP/1.1\r\nHost: webhook\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("status %d, close %v, %v: want 200 on a kept-alive connection", resp.StatusCode, resp.Close, err)
	}
	resp.Body.Close()
	n, err := io.Copy(io.Discard, br) // returns at EOF: the server closed the connection
	if err != nil || n != 0 {
		t.Fatalf("reading the idle connection: %d bytes, %v; want EOF", n, err)
	}
	if d := time.Since(sent); d < idle {
		t.Errorf("closed %s after the request, before the idle timeout %s", d, idle)
	}
}

// TestSlowBodyCut: a body still unsent when the review's time is up (the timeout the API
// server puts in the URL) is answered 408, and the review never starts.
func TestSlowBodyCut(t *testing.T) {
	const timeout = 200 * time.Millisecond
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir, "webhook")
	certs, err := NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(testConfig(t))
	t.Cleanup(g.release)
	srv := newServer(newHandler(g.config, discardLog(), Limits{}).mux(), certs, Options{}, discardLog())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(testwait.Deadline(t)); err != nil {
		t.Fatal(err)
	}
	body := reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
	sent := time.Now()
	_, err = fmt.Fprintf(conn, "POST %s?timeout=%s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		PathMutate, timeout, len(body), body[:len(body)/2])
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.HasPrefix(string(b), "read request body: ") {
		t.Errorf("status %d, body %q; want 408, read request body: …", resp.StatusCode, b)
	}
	if d := time.Since(sent); d < timeout {
		t.Errorf("answered after %s, before the review's timeout %s", d, timeout)
	}
	if n := g.calls.Load(); n != 0 {
		t.Errorf("%d reviews got to Mutate, want none", n)
	}
}
