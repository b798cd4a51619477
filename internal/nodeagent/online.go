package nodeagent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// onlineEvery is how often the node's online CPUs are looked at: sysfs files send no
// inotify events, so they are polled, as the kubelet and other node agents do.
const onlineEvery = 2 * time.Second

// topologySetter is what watchOnline needs of the NRI agent (nri.Agent.SetTopology).
type topologySetter interface {
	SetTopology(*topology.Topology) error
}

// onlineWatch watches the online CPU list of a sysfs tree.
type onlineWatch struct {
	sysfs, path string
	last        []byte
	iso         topology.HostIsolation // what the host isolated at boot: a CPU going offline does not change it
}

// newOnlineWatch reads the online CPU list now: changes are counted from here. Each topology
// it reads gets iso.
func newOnlineWatch(sysfs string, iso topology.HostIsolation) *onlineWatch {
	w := &onlineWatch{sysfs: sysfs, path: filepath.Join(sysfs, "devices", "system", "cpu", "online"), iso: iso}
	w.last, _ = os.ReadFile(w.path)
	return w
}

// run switches a to the node's topology whenever the online CPU list changes (CPUs taken
// offline or brought back), until ctx ends. It reports each change.
func (w *onlineWatch) run(ctx context.Context, a topologySetter, every time.Duration, log *slog.Logger) {
	sysfs, path, last := w.sysfs, w.path, w.last
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := os.ReadFile(path)
		if err != nil || string(now) == string(last) {
			continue
		}
		topo, err := topology.Discover(sysfs)
		if err != nil {
			log.Error("online CPUs changed, but the topology cannot be read; keeping the current one", "err", err)
			continue
		}
		topo.Isolation = w.iso
		if err := a.SetTopology(topo); err != nil {
			log.Error("online CPUs changed, but the pool config does not fit them", "online", topo.Online().String(), "err", err)
			continue
		}
		last = now
		log.Warn("online CPUs changed", "online", topo.Online().String(), "offline", topo.Offline.String())
	}
}
