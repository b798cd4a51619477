package extender

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/testwait"
)

// TestServerBounds: the server bounds every phase of a connection and the headers' size.
func TestServerBounds(t *testing.T) {
	s := newServer(http.NotFoundHandler(), serverTimeouts, quiet())
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": s.ReadHeaderTimeout, "ReadTimeout": s.ReadTimeout,
		"WriteTimeout": s.WriteTimeout, "IdleTimeout": s.IdleTimeout} {
		if d <= 0 || d > 2*time.Minute {
			t.Errorf("%s = %v, want in (0, 2m]", name, d)
		}
	}
	if s.ReadHeaderTimeout > s.ReadTimeout || s.ReadTimeout > s.WriteTimeout {
		t.Errorf("ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v: want increasing", s.ReadHeaderTimeout, s.ReadTimeout,
			s.WriteTimeout)
	}
	if s.MaxHeaderBytes <= 0 || s.MaxHeaderBytes > 1<<20 {
		t.Errorf("MaxHeaderBytes = %d", s.MaxHeaderBytes)
	}
}

// serve runs newServer(h, t) on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, tm timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(h, tm, quiet())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedWithin reads conn until the server closes it, failing the test at testwait.Deadline.
func closedWithin(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	if err := conn.SetReadDeadline(testwait.Deadline(t)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection is still open", what)
	}
}

// TestConnectionsBounded: an idle keep-alive connection, a request whose headers never end
// and one whose body never ends are each closed by the server. Each phase has a server
// whose timeout for that phase is short and the others longer than any test run, so that a
// slow machine meets only the timeout under test: a request sent late is still read.
func TestConnectionsBounded(t *testing.T) {
	const short, long = 100 * time.Millisecond, time.Hour
	dial := func(tm timeouts) net.Conn {
		conn, err := net.Dial("tcp", serve(t, testHandler(t), tm))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	idle := dial(timeouts{readHeader: long, read: long, write: long, idle: short})
	if _, err := io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %v, %v", resp, err)
	}
	closedWithin(t, idle, "idle after a request")

	slowHeaders := dial(timeouts{readHeader: short, read: long, write: long, idle: long})
	if _, err := io.WriteString(slowHeaders, "POST /filter HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, slowHeaders, "headers unfinished")

	slowBody := dial(timeouts{readHeader: long, read: short, write: long, idle: long})
	if _, err := io.WriteString(slowBody, "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"Pod\":"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, slowBody, "body unfinished")
}

// TestRequestEnded: a request whose context has ended is not worked on: 503.
func TestRequestEnded(t *testing.T) {
	h := testHandler(t)
	body := []byte(`{"Pod":` + webPod + `,"NodeNames":["a","b","old"]}`)
	for _, path := range []string{"/filter", "/prioritize"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := serveBounded(t, h, jsonPost(path, body).WithContext(ctx))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "request ended: context canceled") {
			t.Errorf("POST %s, context ended: %d %s", path, rec.Code, rec.Body)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		cfg      Config
		insecure bool
		err      string
	}{
		{cfg: Config{Address: "127.0.0.1:8888"}},
		{cfg: Config{Address: "127.0.0.2:8888"}},
		{cfg: Config{Address: "[::1]:8888"}},
		{cfg: Config{Address: "localhost:8888"}},
		{cfg: Config{Address: ":8443", CertFile: "c", KeyFile: "k"}},
		{cfg: Config{Address: ":8888", Insecure: true}, insecure: true},
		{cfg: Config{Address: "10.0.0.1:8888", CertFile: "c"}, err: `"10.0.0.1:8888": want a loopback address, or HTTPS ` +
			"(--tls-cert and --tls-key), or --insecure-listen to serve plain HTTP there"},
		{cfg: Config{Address: ":8888"}, err: `":8888": want a loopback address`},
		{cfg: Config{Address: "localhost.example.com:8888"}, err: "want a loopback address"},
		{cfg: Config{Address: "127.0.0.1"}, err: `"127.0.0.1": address 127.0.0.1: missing port in address`},
	} {
		insecure, err := CheckListen(tc.cfg)
		if insecure != tc.insecure || tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckListen(%+v) = %v, %v; want %v, %q", tc.cfg, insecure, err, tc.insecure, tc.err)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789x", 10, "0123456…"},
		{"ab" + strings.Repeat("é", 10), 10, "abéé…"}, // 9 bytes: a third é would split
	} {
		if got := clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
