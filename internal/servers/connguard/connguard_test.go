package connguard_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/servers/connguard"
)

// long is every server timeout in these tests: a connection is closed by the guard or not
// at all while a test runs, so no outcome depends on how fast the machine is.
const long = 10 * time.Minute

// failAfter bounds a read that would hang if the guard failed; it is never the thing tested.
const failAfter = 2 * time.Minute

// server serves h behind a guard with lim on 127.0.0.1; /block waits for release.
func server(t *testing.T, lim connguard.Limits, useTLS bool) (g *connguard.Guard, addr string, entered chan struct{}, release chan struct{}) {
	t.Helper()
	g = connguard.New(lim)
	entered, release = make(chan struct{}, 16), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /block", func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "released")
	})
	s := httptest.NewUnstartedServer(mux)
	s.Config.ReadHeaderTimeout, s.Config.ReadTimeout, s.Config.WriteTimeout, s.Config.IdleTimeout = long, long, long, long
	g.Wire(s.Config)
	s.Listener = g.Listener(s.Listener)
	if useTLS {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		s.CloseClientConnections()
		s.Close()
	})
	return g, s.Listener.Addr().String(), entered, release
}

// client is one connection from a source address, sending requests on it in turn.
type client struct {
	net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, from, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(failAfter)); err != nil {
		t.Fatal(err)
	}
	return &client{Conn: c, rd: bufio.NewReader(c)}
}

// get sends GET path on the connection and returns the answer's body, or an error when the
// server closed the connection instead.
func (c *client) get(path string) (string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: guard\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// mustGet wants the answer "ok" (or what /block answers).
func (c *client) mustGet(t *testing.T, path, want string) {
	t.Helper()
	got, err := c.get(path)
	if err != nil || got != want {
		t.Fatalf("GET %s from %s: %q, %v; want %q", path, c.LocalAddr(), got, err, want)
	}
}

// closedByServer wants the server to have closed the connection: a request gets no answer.
func (c *client) closedByServer(t *testing.T, why string) {
	t.Helper()
	got, err := c.get("/ok")
	if err == nil {
		t.Fatalf("%s: connection from %s answered %q; want it closed by the server", why, c.LocalAddr(), got)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: connection from %s still open after %s; want it closed by the server", why, c.LocalAddr(), failAfter)
	}
}

func insecure() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // the test's own server

func TestPerSource(t *testing.T) {
	g, addr, _, _ := server(t, connguard.Limits{Max: 100, PerSource: 2}, false)
	a1, a2 := dial(t, "127.0.0.2", addr), dial(t, "127.0.0.2", addr)
	a1.mustGet(t, "/ok", "ok") // answered: both held
	a2.mustGet(t, "/ok", "ok")
	a3 := dial(t, "127.0.0.2", addr)
	a3.closedByServer(t, "a third connection from one source with PerSource 2")
	b := dial(t, "127.0.0.3", addr)
	b.mustGet(t, "/ok", "ok")
	a1.mustGet(t, "/ok", "ok") // the first two are untouched
	a2.mustGet(t, "/ok", "ok")
	if st := g.Stats(); st.Refused != 1 || st.Evicted != 0 || st.Held != 3 {
		t.Errorf("stats %+v; want 3 held, 1 refused, 0 evicted", st)
	}
	_ = a1.Close()
	for g.Stats().Held != 2 { // the server sees a1's end when its read returns
		runtime.Gosched()
	}
	a4 := dial(t, "127.0.0.2", addr) // a slot of the source is free again
	a4.mustGet(t, "/ok", "ok")
}

func TestEvictsLongestWaiting(t *testing.T) {
	g, addr, _, _ := server(t, connguard.Limits{Max: 3}, false)
	c1, c2, c3 := dial(t, "127.0.0.2", addr), dial(t, "127.0.0.3", addr), dial(t, "127.0.0.4", addr)
	for _, c := range []*client{c1, c2, c3} {
		c.mustGet(t, "/ok", "ok")
	}
	c1.mustGet(t, "/ok", "ok") // c1 was just served: c2 has waited longest
	c4 := dial(t, "127.0.0.5", addr)
	c4.mustGet(t, "/ok", "ok")
	c2.closedByServer(t, "the longest waiting connection when a fourth comes to Max 3")
	c1.mustGet(t, "/ok", "ok")
	c3.mustGet(t, "/ok", "ok")
	if st := g.Stats(); st.Evicted != 1 || st.Refused != 0 || st.Held != 3 {
		t.Errorf("stats %+v; want 3 held, 1 evicted, 0 refused", st)
	}
}

// A connection that has not sent a request yet (a client holding it open) is evicted too.
func TestEvictsSilentConnection(t *testing.T) {
	_, addr, _, _ := server(t, connguard.Limits{Max: 1}, false)
	silent := dial(t, "127.0.0.2", addr)
	// The silent one is accepted once a second one gets served after it; to know it was
	// accepted first, ask the server something on it only after the second is served.
	probe := dial(t, "127.0.0.3", addr)
	probe.mustGet(t, "/ok", "ok")
	silent.closedByServer(t, "a silent connection when a new one comes to Max 1")
}

func TestInHandlerNeverEvicted(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			g, addr, entered, release := server(t, connguard.Limits{Max: 1}, useTLS)
			busy := make(chan error, 1)
			go func() {
				var c *http.Client
				if useTLS {
					c = &http.Client{Transport: &http.Transport{TLSClientConfig: insecure()}}
				} else {
					c = &http.Client{}
				}
				scheme := map[bool]string{false: "http", true: "https"}[useTLS]
				resp, err := c.Get(scheme + "://" + addr + "/block")
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "released" {
						err = fmt.Errorf("body %q", b)
					}
				}
				busy <- err
			}()
			<-entered
			late := dial(t, "127.0.0.3", addr)
			late.closedByServer(t, "a new connection while the only slot is in a handler")
			close(release)
			if err := <-busy; err != nil {
				t.Fatalf("the request in the handler: %v; want it answered", err)
			}
			if st := g.Stats(); st.Refused != 1 || st.Evicted != 0 {
				t.Errorf("stats %+v; want 1 refused, 0 evicted", st)
			}
		})
	}
}

func TestUnlimited(t *testing.T) {
	g, addr, _, _ := server(t, connguard.Limits{}, false)
	var cs []*client
	for i := range 20 {
		c := dial(t, "127.0.0.2", addr)
		c.mustGet(t, "/ok", "ok")
		cs = append(cs, c)
		if st := g.Stats(); st.Held != i+1 {
			t.Fatalf("held %d after %d connections", st.Held, i+1)
		}
	}
	for _, c := range cs {
		c.mustGet(t, "/ok", "ok")
	}
	if st := g.Stats(); st.Evicted != 0 || st.Refused != 0 {
		t.Errorf("stats %+v; want nothing evicted or refused", g.Stats())
	}
}
