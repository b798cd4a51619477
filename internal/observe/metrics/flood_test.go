package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/observe/metrics"
)

// long is every server timeout here: the flood's connections are never closed by a timer
// while the test runs, so what is answered depends on the connection guard alone, not on
// how fast the machine is. failAfter bounds a request that would otherwise hang.
const (
	long      = 10 * time.Minute
	failAfter = 2 * time.Minute
)

// flood holds n connections to addr from source, each one either silent (TCP only) or kept
// alive after one request, and opens a new one whenever the server closes one, until ctx ends.
func flood(ctx context.Context, wg *sync.WaitGroup, source, addr string, n int, keepAlive bool) {
	for range n {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					return
				}
				stop := context.AfterFunc(ctx, func() { _ = c.Close() })
				if keepAlive {
					_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n")
				}
				_, _ = io.Copy(io.Discard, c) // until the server closes it
				stop()
				_ = c.Close()
				select { // the next one, as an attacker would, without spinning the test's CPUs
				case <-ctx.Done():
				case <-time.After(time.Millisecond):
				}
			}
		})
	}
}

// probe asks path on a new connection from source, as the kubelet does (keep-alives off),
// and returns "<status> <body>".
func probe(source, url string) string {
	tr := &http.Transport{DisableKeepAlives: true,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}).DialContext}
	c := &http.Client{Transport: tr, Timeout: failAfter}
	resp, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(bufio.NewReader(resp.Body))
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// TestProbesAnsweredDuringFlood: one source holds 64 silent connections and 32 kept-alive
// ones on the agent's metrics address, reopening each the server closes (the flood that
// restarted the agent: its probes waited behind 32 held connections). The probes on the
// health listener, the same probes on the metrics address from another source, and a scrape
// from a third are all answered while it runs.
func TestProbesAnsweredDuringFlood(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	lim := metrics.Limits{ReadHeader: long, Read: long, Write: long, Idle: long}
	reg := prometheus.NewRegistry()
	srv, err := metrics.Listen("127.0.0.1:0", reg, log, metrics.WithLimits(lim))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	health, err := metrics.ListenHealth("127.0.0.1:0", log, metrics.WithLimits(lim), metrics.WithReady(func() error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	defer health.Close(t.Context())

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	addr := srv.Addr().String()
	flood(ctx, &wg, "127.0.0.2", addr, 64, false)
	flood(ctx, &wg, "127.0.0.2", addr, 32, true)
	// The flood holds its share before the probes: PerSource of the metrics address.
	for srv.Connections().Held < metrics.DefaultLimits.PerSource {
		time.Sleep(time.Millisecond)
	}

	for i := range 6 { // failureThreshold 3, twice over
		for _, path := range []string{"/healthz", "/readyz"} {
			if got := probe("127.0.0.1", "http://"+health.Addr().String()+path); got != "200 ok\n" {
				t.Errorf("probe %d of %s on the health listener during the flood: %q; want 200 ok", i, path, got)
			}
		}
		if got := probe("127.0.0.3", "http://"+addr+"/healthz"); got != "200 ok\n" {
			t.Errorf("probe %d of /healthz on the metrics address from another source during the flood: %q; want 200 ok", i, got)
		}
	}
	if got := probe("127.0.0.4", "http://"+addr+"/metrics"); len(got) < 4 || got[:4] != "200 " {
		t.Errorf("a scrape during the flood: %.80q; want 200", got)
	}
	st := srv.Connections()
	if st.Refused == 0 {
		t.Errorf("metrics address: %+v; want the flood's connections beyond PerSource refused", st)
	}
	t.Logf("metrics address during the flood: %+v; health listener: %+v", st, health.Connections())
}
