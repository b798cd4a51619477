package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/observe/metrics"
)

func TestServe(t *testing.T) {
	reg := metrics.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "podfence_test_gauge", Help: "A test gauge."})
	g.Set(7)
	reg.MustRegister(g)
	srv, err := metrics.Listen("127.0.0.1:0", reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr().String()
	for _, tc := range []struct{ path, want string }{
		{"/metrics", "podfence_test_gauge 7\n"},
		{"/metrics", "go_goroutines "},
		{"/metrics", "process_start_time_seconds "},
		{"/healthz", "ok\n"},
	} {
		code, body := get(t, base+tc.path)
		if code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d, body lacks %q:\n%.300s", tc.path, code, tc.want, body)
		}
	}
	if code, _ := get(t, base+"/other"); code != http.StatusNotFound {
		t.Errorf("GET /other: %d", code)
	}
	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after Close")
	}
}

func TestListenBadAddress(t *testing.T) {
	_, err := metrics.Listen("127.0.0.1:notaport", prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.HasPrefix(err.Error(), "metrics address 127.0.0.1:notaport: ") {
		t.Errorf("error %v", err)
	}
}

func get(t *testing.T, url string) (int, string) {
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
	return resp.StatusCode, string(b)
}
