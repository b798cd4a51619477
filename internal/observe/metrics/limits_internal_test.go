package metrics

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServerLimits: the server bounds every phase of a request, its header, idle
// connections and the connections served at once; WithLimits replaces what it gives.
func TestServerLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want Limits
	}{
		{name: "default", want: DefaultLimits},
		{name: "idle 1s", opts: []Option{WithLimits(Limits{Idle: time.Second, MaxConnections: 2})},
			want: Limits{ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 30 * time.Second, Idle: time.Second,
				MaxHeaderBytes: 16 << 10, MaxConnections: 2, PerSource: 8}},
	} {
		s, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler), tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		got := Limits{ReadHeader: s.srv.ReadHeaderTimeout, Read: s.srv.ReadTimeout, Write: s.srv.WriteTimeout, Idle: s.srv.IdleTimeout,
			MaxHeaderBytes: s.srv.MaxHeaderBytes, MaxConnections: s.limits.MaxConnections, PerSource: s.limits.PerSource}
		if got != tc.want {
			t.Errorf("%s: server limits %+v, want %+v", tc.name, got, tc.want)
		}
		if got.ReadHeader <= 0 || got.Read <= 0 || got.Write <= 0 || got.Idle <= 0 || got.MaxHeaderBytes <= 0 || got.MaxConnections <= 0 || got.PerSource <= 0 {
			t.Errorf("%s: an unbounded limit in %+v", tc.name, got)
		}
		if s.srv.Protocols == nil || s.srv.Protocols.HTTP2() {
			t.Errorf("%s: HTTP/2 on: a connection would carry many requests at once", tc.name)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
