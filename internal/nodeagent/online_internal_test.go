package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/testwait"
)

type topoRecorder chan *topology.Topology

func (r topoRecorder) SetTopology(t *topology.Topology) error { r <- t; return nil }

// TestWatchOnline: CPUs taken offline in sysfs reach the agent as a new topology without
// them, and again when they are back, with the host's isolation read at start.
func TestWatchOnline(t *testing.T) {
	sysfs := t.TempDir()
	if err := os.CopyFS(sysfs, os.DirFS("../cpu/topology/testdata/sysfs/dual-socket-smt-apart")); err != nil {
		t.Fatal(err)
	}
	online := filepath.Join(sysfs, "devices", "system", "cpu", "online")
	got := make(topoRecorder, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	iso := topology.CmdlineIsolation("isolcpus=4,52", cpusetRange(0, 95))
	w := newOnlineWatch(sysfs, iso)
	go func() {
		w.run(ctx, got, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	for _, tc := range []struct{ online, offline string }{{"0-19,24-67,72-95\n", "20-23,68-71"}, {"0-95\n", ""}} {
		if err := os.WriteFile(online+".tmp", []byte(tc.online), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(online+".tmp", online); err != nil { // sysfs reads are atomic
			t.Fatal(err)
		}
		topo := testwait.Receive(t, got, "a topology after writing online="+tc.online)
		if topo.Offline.String() != tc.offline || topo.Online().Intersection(topo.Offline).Size() != 0 {
			t.Errorf("online %q: topology offline %s, online %s; want offline %q", tc.online, topo.Offline, topo.Online(), tc.offline)
		}
		if topo.Isolation.Domain.String() != "4,52" {
			t.Errorf("online %q: isolation %s, want the one read at start", tc.online, topo.Isolation.Summary())
		}
	}
}

// cpusetRange is the CPUs lo to hi.
func cpusetRange(lo, hi int) cpuset.CPUSet {
	var ids []int
	for id := lo; id <= hi; id++ {
		ids = append(ids, id)
	}
	return cpuset.New(ids...)
}
