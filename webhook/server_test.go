package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// startServe runs Serve on a loopback port until the test ends; it returns the address.
func startServe(t *testing.T, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, opts, discardLog()) }()
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

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestCertReload rewrites the certificate files under a running server: a broken pair keeps
// the old certificate, a new pair is served without a restart, and clients that trust only
// the new certificate get through.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := writeCert(t, dir, "first")
	addr := startServe(t, Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond})
	if got := servedSerial(t, addr); got != first.SerialNumber.String() {
		t.Fatalf("serial %s, want the first certificate's %s", got, first.SerialNumber)
	}

	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // several reload attempts
	if got := servedSerial(t, addr); got != first.SerialNumber.String() {
		t.Fatalf("serial %s after a broken key: want the first certificate still", got)
	}

	_, _, second := writeCert(t, dir, "second")
	eventually(t, "the second certificate", func() bool { return servedSerial(t, addr) == second.SerialNumber.String() })

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
	addr := startServe(t, Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 10 * time.Millisecond,
		LoadConfig: func() (*Config, error) { return Load("", profiles) }})
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
	if err := os.WriteFile(profiles, []byte("- {namespaces: [a], policy: strict}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := patch(); !strings.Contains(got, `"one"`) {
		t.Fatalf("patch %s after a broken profile file: want group one still", got)
	}
	if err := os.WriteFile(profiles, []byte("- {namespaces: [a], group: two}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "group two", func() bool { return strings.Contains(patch(), `"two"`) })
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
