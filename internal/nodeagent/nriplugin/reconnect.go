package nriplugin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// Default reconnect backoff bounds.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Connection says where and as what the agent registers with the runtime.
type Connection struct {
	Socket      string // the runtime's NRI socket, e.g. /var/run/nri/nri.sock
	PluginName  string // e.g. podfence
	PluginIndex string // two digits, e.g. "10": the order among plugins
	// MinBackoff and MaxBackoff bound the wait between connection attempts, doubled after
	// each failure (DefaultMinBackoff, DefaultMaxBackoff if zero).
	MinBackoff, MaxBackoff time.Duration
}

// Prepare reads what the next Synchronize needs from outside the agent (the kubelet's pod
// resources of every pod, bounded; the DRA grants), so that the Synchronize waits for
// nothing; Run calls it before each connection. A Synchronize without it rebuilds from what
// the agent holds.
func (a *Plugin) Prepare(ctx context.Context) {
	a.kubelet.prelist(ctx)
	a.grants.load()
}

// Run connects to the runtime and serves it until ctx ends. When the connection is lost, or
// cannot be made, it retries with exponential backoff; the runtime synchronizes the agent
// on every new connection. It returns nil when ctx ends, or an error when the plugin cannot
// be set up at all (a bad name or index).
func (a *Plugin) Run(ctx context.Context, conn Connection) error {
	if err := api.CheckPluginIndex(conn.PluginIndex); err != nil {
		return fmt.Errorf("NRI plugin index: %w", err)
	}
	if conn.PluginName == "" {
		return fmt.Errorf("NRI plugin name is empty")
	}
	minB, maxB := conn.MinBackoff, conn.MaxBackoff
	if minB <= 0 {
		minB = DefaultMinBackoff
	}
	if maxB < minB {
		maxB = max(DefaultMaxBackoff, minB)
	}
	backoff := minB
	for {
		a.Prepare(ctx)
		lost := make(chan struct{})
		var once sync.Once
		s, err := stub.New(a,
			stub.WithPluginName(conn.PluginName),
			stub.WithPluginIdx(conn.PluginIndex),
			stub.WithSocketPath(conn.Socket),
			stub.WithLogger(stubLogger{a.log}),
			stub.WithOnClose(func() { once.Do(func() { close(lost) }) }),
		)
		if err != nil {
			return fmt.Errorf("set up NRI plugin %s-%s: %w", conn.PluginIndex, conn.PluginName, err)
		}
		if err := s.Start(ctx); err != nil {
			a.log.Warn("cannot connect to runtime", "socket", conn.Socket, "retryIn", backoff, "err", err)
			s.Stop()
		} else {
			a.log.Info("connected to runtime", "socket", conn.Socket, "plugin", conn.PluginIndex+"-"+conn.PluginName)
			backoff = minB
			select {
			case <-ctx.Done():
				s.Stop()
				return nil
			case <-lost:
				a.log.Warn("lost connection to runtime; reconnecting", "socket", conn.Socket, "retryIn", backoff)
				s.Stop()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxB)
	}
}
