package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
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
