package metrics_test

import (
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/observe/metrics"
)

// TestReadyAndState: /readyz follows the readiness check; /state serves the state as JSON,
// one call per request.
func TestReadyAndState(t *testing.T) {
	var ready atomic.Bool
	calls := 0
	h := metrics.Handler(prometheus.NewRegistry(),
		metrics.WithReady(func() error {
			if !ready.Load() {
				return errors.New("waiting for the runtime")
			}
			return nil
		}),
		metrics.WithState(func() any { calls++; return map[string]any{"calls": calls, "pools": []string{"a"}} }))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		path, want, ctype string
		code              int
		before            func()
	}{
		{path: "/readyz", code: 503, want: "not ready: waiting for the runtime\n", ctype: "text/plain; charset=utf-8"},
		{path: "/readyz", code: 200, want: "ok\n", before: func() { ready.Store(true) }},
		{path: "/state", code: 200, want: "{\n  \"calls\": 1,\n  \"pools\": [\n    \"a\"\n  ]\n}\n", ctype: "application/json"},
		{path: "/state", code: 200, want: "\"calls\": 2"},
		{path: "/healthz", code: 200, want: "ok\n"},
	} {
		if tc.before != nil {
			tc.before()
		}
		resp, body := fetch(t, srv.URL+tc.path)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.code, tc.want)
		}
		if ct := resp.Header.Get("Content-Type"); tc.ctype != "" && ct != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.ctype)
		}
	}
	if resp, _ := fetch(t, srv.URL+"/state"); resp.Header.Get("Content-Type") != "application/json" {
		t.Error("state is not JSON")
	}
}

func TestDefaults(t *testing.T) {
	srv, err := metrics.Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	base := "http://" + srv.Addr().String()
	if resp, body := fetch(t, base+"/readyz"); resp.StatusCode != 200 || body != "ok\n" {
		t.Errorf("/readyz without a check: %d %q", resp.StatusCode, body)
	}
	if resp, _ := fetch(t, base+"/state"); resp.StatusCode != 404 {
		t.Errorf("/state without a state: %d", resp.StatusCode)
	}
}

func TestStateUnencodable(t *testing.T) {
	srv := httptest.NewServer(metrics.Handler(prometheus.NewRegistry(), metrics.WithState(func() any { return math.NaN() })))
	defer srv.Close()
	if resp, body := fetch(t, srv.URL+"/state"); resp.StatusCode != 500 || !strings.HasPrefix(body,
		"encode state: json: unsupported value: NaN") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func fetch(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
