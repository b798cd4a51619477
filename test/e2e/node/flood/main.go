// Command flood holds connections to an address as an attacker would, for the node e2e's
// proof that the agent's probes are answered meanwhile (test/e2e/node/probe-flood.sh):
// -silent connections that send nothing and -keepalive ones that send one request and then
// idle, each reopened as soon as the server closes it, for -for. At the end it prints what it
// saw: connections opened, and those the server closed or refused.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "host:port to flood")
	silent := flag.Int("silent", 64, "connections that send nothing")
	keepAlive := flag.Int("keepalive", 32, "connections that send one request, then idle")
	dur := flag.Duration("for", time.Minute, "how long")
	useTLS := flag.Bool("tls", false, "the keep-alive connections speak TLS (any certificate)")
	flag.Parse()
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "flood: -addr host:port needed")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var opened, closedByServer, held atomic.Int64
	var wg sync.WaitGroup
	hold := func(request bool) {
		var d net.Dialer
		for ctx.Err() == nil {
			c, err := d.DialContext(ctx, "tcp", *addr)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			opened.Add(1)
			held.Add(1)
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			var rw io.ReadWriter = c
			if request && *useTLS {
				rw = tls.Client(c, &tls.Config{InsecureSkipVerify: true}) // an attacker checks nothing
			}
			if request {
				_, _ = io.WriteString(rw, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n")
			}
			_, _ = io.Copy(io.Discard, rw)
			held.Add(-1)
			if stop() {
				closedByServer.Add(1)
			}
			_ = c.Close()
		}
	}
	for range *silent {
		wg.Go(func() { hold(false) })
	}
	for range *keepAlive {
		wg.Go(func() { hold(true) })
	}
	wg.Wait()
	fmt.Printf("flood %s for %s: %d silent + %d keep-alive held; %d connections opened, %d closed by the server\n",
		*addr, *dur, *silent, *keepAlive, opened.Load(), closedByServer.Load())
}
