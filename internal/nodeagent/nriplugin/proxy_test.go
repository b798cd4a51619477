package nriplugin_test

import (
	"io"
	"net"
	"sync"
)

// proxy forwards unix socket connections from front to back, and cuts them all on close,
// as the exit of the process serving back would.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(front, back string) (*proxy, error) {
	l, err := net.Listen("unix", front)
	if err != nil {
		return nil, err
	}
	p := &proxy{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("unix", back)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go pipe(c, b)
			go pipe(b, c)
		}
	}()
	return p, nil
}

func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
