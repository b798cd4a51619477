// Package connguard bounds the connections an HTTP server holds, so that no client can take
// every slot and starve the others (health probes, Prometheus, `podfence status`):
//
//   - at most PerSource connections from one IP address: a new one beyond that is closed at
//     once;
//   - at most Max in all: a new connection then evicts the connection that has waited longest
//     without a request in a handler (just accepted, in its TLS handshake, sending its header,
//     or kept alive between requests). Only when every connection is in a handler is the new
//     one closed.
//
// Accept never waits for a slot (netutil.LimitListener does, so that held connections kept
// every later one, probes too, in the kernel's backlog). A connection in a handler is bounded
// by the server's WriteTimeout; one waiting is bounded by eviction and by ReadHeaderTimeout
// and IdleTimeout.
package connguard

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Limits bound the connections of one server. Zero or less: no bound.
type Limits struct {
	Max       int // connections held at once
	PerSource int // connections from one remote IP address
}

// Guard counts and bounds one server's connections. Use Listener, ConnContext and Handler
// together (Serve wires them into an http.Server).
type Guard struct {
	lim Limits

	mu       sync.Mutex
	waiting  *list.List // of *conn not in a handler, longest waiting first
	held     int
	bySource map[string]int

	evicted, refused atomic.Uint64
}

// New returns a Guard enforcing l.
func New(l Limits) *Guard {
	return &Guard{lim: l, waiting: list.New(), bySource: map[string]int{}}
}

// Stats are what a Guard did so far.
type Stats struct {
	Held             int    // connections held now
	Evicted, Refused uint64 // waiting connections closed for a new one; new connections closed at once
}

// Stats returns the Guard's counts.
func (g *Guard) Stats() Stats {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	return Stats{Held: held, Evicted: g.evicted.Load(), Refused: g.refused.Load()}
}

// Serve wires g into srv (its ConnContext and Handler) and serves srv on ln.
func (g *Guard) Serve(srv *http.Server, ln net.Listener) error {
	g.Wire(srv)
	return srv.Serve(g.Listener(ln))
}

// Wire sets srv's ConnContext and wraps its Handler so that g sees when a request is in a
// handler. Call it before serving on g.Listener.
func (g *Guard) Wire(srv *http.Server) {
	next := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if next != nil {
			ctx = next(ctx, c)
		}
		return g.ConnContext(ctx, c)
	}
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = g.Handler(h)
}

// Listener returns ln whose Accept applies g's limits; the connections it returns are g's.
func (g *Guard) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, g: g} }

type ctxKey struct{}

// ConnContext records c's guarded connection in ctx for Handler (http.Server.ConnContext).
func (g *Guard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if gc := unwrap(c); gc != nil && gc.g == g {
		return context.WithValue(ctx, ctxKey{}, gc)
	}
	return ctx
}

// Handler marks the request's connection as in a handler while h runs: it cannot be evicted.
func (g *Guard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(ctxKey{}).(*conn)
		if c == nil {
			h.ServeHTTP(w, r)
			return
		}
		g.setBusy(c, true)
		defer g.setBusy(c, false)
		h.ServeHTTP(w, r)
	})
}

type listener struct {
	net.Listener
	g *Guard
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

// admit takes c within the limits, evicting the longest waiting connection if every slot is
// held; it closes c and returns nil when c cannot be taken.
func (g *Guard) admit(c net.Conn) *conn {
	src := sourceOf(c.RemoteAddr())
	var victim *conn
	g.mu.Lock()
	if g.lim.PerSource > 0 && g.bySource[src] >= g.lim.PerSource {
		g.mu.Unlock()
		g.refused.Add(1)
		_ = c.Close()
		return nil
	}
	if g.lim.Max > 0 && g.held >= g.lim.Max {
		front := g.waiting.Front()
		if front == nil {
			g.mu.Unlock()
			g.refused.Add(1)
			_ = c.Close()
			return nil
		}
		victim = front.Value.(*conn)
		g.removeLocked(victim)
	}
	gc := &conn{Conn: c, g: g, src: src}
	gc.elem = g.waiting.PushBack(gc)
	g.held++
	g.bySource[src]++
	g.mu.Unlock()
	if victim != nil {
		g.evicted.Add(1)
		_ = victim.Conn.Close()
	}
	return gc
}

// removeLocked forgets c; false if it was already gone.
func (g *Guard) removeLocked(c *conn) bool {
	if c.gone {
		return false
	}
	c.gone = true
	if c.elem != nil {
		g.waiting.Remove(c.elem)
		c.elem = nil
	}
	g.held--
	if g.bySource[c.src]--; g.bySource[c.src] <= 0 {
		delete(g.bySource, c.src)
	}
	return true
}

// setBusy counts c's requests in a handler (HTTP/2 carries several at once): a connection
// with none goes to the back of the waiting list.
func (g *Guard) setBusy(c *conn, busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if busy {
		c.busy++
	} else {
		c.busy--
	}
	if c.gone {
		return
	}
	switch {
	case c.busy > 0 && c.elem != nil:
		g.waiting.Remove(c.elem)
		c.elem = nil
	case c.busy == 0 && c.elem == nil:
		c.elem = g.waiting.PushBack(c)
	}
}

// conn is a connection g holds. Fields but Conn are guarded by g.mu.
type conn struct {
	net.Conn
	g    *Guard
	src  string
	elem *list.Element // in g.waiting; nil while in a handler
	busy int           // requests in a handler
	gone bool
}

func (c *conn) Close() error {
	c.g.mu.Lock()
	c.g.removeLocked(c)
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// unwrap finds the guarded connection under c (a *tls.Conn wraps it).
func unwrap(c net.Conn) *conn {
	for c != nil {
		if gc, ok := c.(*conn); ok {
			return gc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// sourceOf is the IP address of a remote address (the whole address when it has no port).
func sourceOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
