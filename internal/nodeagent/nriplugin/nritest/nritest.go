// Package nritest is test support shared by the packages that drive the podfence agent
// through the real NRI runtime side (github.com/containerd/nri/pkg/adaptation). It is
// imported from _test.go files only.
package nritest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/testwait"
)

// QuietLogs silences the NRI library's logger, which is global; call it from TestMain to
// keep test output readable.
func QuietLogs() { nrilog.Set(quiet{}) }

type quiet struct{}

func (quiet) Debugf(context.Context, string, ...any) {}
func (quiet) Infof(context.Context, string, ...any)  {}
func (quiet) Warnf(context.Context, string, ...any)  {}
func (quiet) Errorf(context.Context, string, ...any) {}

// ShortDir is a temp dir with a short path, removed when the test ends: unix socket paths
// are limited to ~108 bytes.
func ShortDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pf-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// NoPluginTimeouts lifts the NRI runtime side's bounds on plugins (5 s to register, 2 s
// for each request), which the adaptation keeps globally, to an hour: a test asserts what a
// plugin answers, not how fast a loaded machine lets it answer. StartRuntime calls it; a
// test that starts its own runtime side calls it first.
func NoPluginTimeouts() {
	adaptation.SetPluginRegistrationTimeout(time.Hour)
	adaptation.SetPluginRequestTimeout(time.Hour)
}

// Runtime is the NRI runtime side listening on a unix socket, counting the
// synchronisations it makes; it stops when the test ends.
type Runtime struct {
	*adaptation.Adaptation
	Socket string

	mu    sync.Mutex
	syncs int
}

// StartRuntime starts a runtime on socket (empty: one in a new ShortDir). It loads no
// plugins or plugin configs of its own.
func StartRuntime(tb testing.TB, socket string) *Runtime {
	tb.Helper()
	NoPluginTimeouts()
	if socket == "" {
		socket = filepath.Join(ShortDir(tb), "nri.sock")
	}
	rt := &Runtime{Socket: socket}
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		rt.mu.Lock()
		rt.syncs++
		rt.mu.Unlock()
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	none := filepath.Join(filepath.Dir(socket), "none")
	var err error
	rt.Adaptation, err = adaptation.New("test-runtime", "1", sync, update, adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(none), adaptation.WithPluginConfigPath(none))
	if err != nil {
		tb.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rt.Stop)
	return rt
}

// WaitSynced waits until n plugins have connected and been synchronised (after the
// runtime's own synchronisation at start-up, before any plugin), then lets plugins
// register.
func (rt *Runtime) WaitSynced(tb testing.TB, n int) {
	tb.Helper()
	testwait.Eventually(tb, fmt.Sprintf("%d plugins synchronised", n), func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.syncs >= 1+n
	})
	rt.BlockPluginSync().Unblock()
}

// Create relays a CRI CreateContainer of ctr in pod through NRI and returns the reply.
func (rt *Runtime) Create(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.CreateContainerResponse, error) {
	return rt.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
}

// NoCheckpoint is a checkpoint store that keeps nothing.
type NoCheckpoint struct{}

func (NoCheckpoint) Put(allocation.Allocation) error        { return nil }
func (NoCheckpoint) Delete(allocation.Key) error            { return nil }
func (NoCheckpoint) Load() ([]allocation.Allocation, error) { return nil, nil }

// LogBuffer is a log sink safe for concurrent handlers.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Logger is a debug-level text logger to w.
func Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
