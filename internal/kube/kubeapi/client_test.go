package kubeapi_test

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/podfence/podfence/internal/kube/kubeapi"
)

// request is what apiServer saw of one request.
type request struct {
	method, uri, contentType, accept, auth, userAgent, body string
}

// apiServer is a TLS server that records requests and answers with code and body.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []request
	code int // 0 is 200
	body string
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, request{method: r.Method, uri: r.URL.RequestURI(), contentType: r.Header.Get("Content-Type"),
			accept: r.Header.Get("Accept"), auth: r.Header.Get("Authorization"), userAgent: r.Header.Get("User-Agent"), body: string(b)})
		code, body := s.code, s.body
		s.mu.Unlock()
		if code == 0 {
			code = http.StatusOK
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake of TestClientErrors
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

func (s *apiServer) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.seen...)
}

// TestDo: headers, body and answer; a rotated token file is re-read.
func TestDo(t *testing.T) {
	srv := newAPIServer(t)
	srv.body = `{"kind":"Node"}`
	tokenFile := filepath.Join(t.TempDir(), "token")
	write(t, tokenFile, "tok-1\n")
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL + "/", CAData: srv.caPEM(), TokenFile: tokenFile}, "podfence-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, code, err := c.Do(ctx, http.MethodPatch, "/api/v1/nodes/n1?fieldManager=x", "application/merge-patch+json", []byte(`{"a":1}`))
	if err != nil || code != 200 || string(b) != srv.body {
		t.Fatalf("Do = %q, %d, %v", b, code, err)
	}
	write(t, tokenFile, "tok-2") // rotated
	if _, code, err := c.Do(ctx, http.MethodGet, "/api/v1/nodes/n1", "", nil); err != nil || code != 200 {
		t.Fatalf("GET: %d, %v", code, err)
	}
	want := []request{
		{method: "PATCH", uri: "/api/v1/nodes/n1?fieldManager=x", contentType: "application/merge-patch+json", accept: "application/json",
			auth: "Bearer tok-1", userAgent: "podfence-test", body: `{"a":1}`},
		{method: "GET", uri: "/api/v1/nodes/n1", accept: "application/json", auth: "Bearer tok-2", userAgent: "podfence-test"},
	}
	got := srv.requests()
	if len(got) != len(want) {
		t.Fatalf("requests %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCall(t *testing.T) {
	srv := newAPIServer(t)
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL, CAData: srv.caPEM(), Token: "t"}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		code       int
		body, want string
	}{
		{201, `{}`, ""},
		{403, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"n1\" is forbidden: User ` +
			`\"system:serviceaccount:x:y\" cannot patch resource \"nodes\"","code":403}`,
			`PATCH /api/v1/nodes/n1: 403 Forbidden: nodes "n1" is forbidden: User "system:serviceaccount:x:y" cannot patch resource "nodes"`},
		{502, `<html>bad gateway</html>`, `PATCH /api/v1/nodes/n1: 502 Bad Gateway`},
	} {
		srv.mu.Lock()
		srv.code, srv.body = tc.code, tc.body
		srv.mu.Unlock()
		b, err := c.Call(ctx, http.MethodPatch, "/api/v1/nodes/n1", "application/merge-patch+json", []byte(`{}`))
		var se *kubeapi.StatusError
		switch {
		case tc.want == "" && (err != nil || string(b) != tc.body):
			t.Errorf("%d: %q, %v", tc.code, b, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.As(err, &se) || se.Code != tc.code):
			t.Errorf("%d: error %v, want %s", tc.code, err, tc.want)
		}
	}
}

func TestClientErrors(t *testing.T) {
	srv := newAPIServer(t)
	untrusted, err := kubeapi.New(kubeapi.Config{Host: srv.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := untrusted.Do(context.Background(), "GET", "/api", "", nil); err == nil ||
		!strings.HasPrefix(err.Error(), `Get "`+srv.URL+`/api": `) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("unverified server: error %v", err)
	}
	for _, tc := range []struct {
		cfg  kubeapi.Config
		want string
	}{
		{cfg: kubeapi.Config{Host: "10.0.0.1"}, want: `API server address "10.0.0.1": want https://host:port`},
		{cfg: kubeapi.Config{Host: "https://h", CAData: []byte("junk")}, want: "API server CA: no PEM certificate in it"},
		{cfg: kubeapi.Config{Host: "https://h", CertData: []byte("junk")},
			want: "client certificate: tls: failed to find any PEM data in certificate input"},
	} {
		if _, err := kubeapi.New(tc.cfg, ""); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v): %v, want %s", tc.cfg, err, tc.want)
		}
	}
	missing, err := kubeapi.New(kubeapi.Config{Host: "https://h", TokenFile: filepath.Join(t.TempDir(), "none")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := missing.Do(context.Background(), "GET", "/api", "", nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing token: %v", err)
	}
}

func TestDoLargeAnswer(t *testing.T) {
	srv := newAPIServer(t)
	srv.body = strings.Repeat("x", kubeapi.MaxResponse+1)
	c, err := kubeapi.New(kubeapi.Config{Host: srv.URL, CAData: srv.caPEM()}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, code, err := c.Do(context.Background(), "GET", "/big", "", nil); code != 200 || err == nil ||
		err.Error() != "GET /big: read answer (200 OK): answer larger than 4194304 bytes" {
		t.Errorf("Do = %d, %v", code, err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
