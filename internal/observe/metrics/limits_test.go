package metrics_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/testwait"
)

// TestIdleConnectionClosed: a kept-alive connection that sends nothing more is closed by the
// server after Limits.Idle (it used to be held until the client left: thousands of them
// were). The test reads until the server's EOF; the deadline bounds a failure. The other
// limits are an hour: nothing but Idle can close the connection, however slow the machine.
func TestIdleConnectionClosed(t *testing.T) {
	srv, err := metrics.Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler),
		metrics.WithLimits(metrics.Limits{ReadHeader: time.Hour, Read: time.Hour, Write: time.Hour, Idle: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("/healthz: %d, close %v, %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close, err)
	}
	if err := conn.SetReadDeadline(testwait.Deadline(t)); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(rd); err != nil || len(rest) != 0 {
		t.Errorf("idle connection: read %q, %v; want the server to close it (EOF)", rest, err)
	}
}
