package nodeagent

import (
	"fmt"
	"log/slog"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// discoverTopology reads the node's CPU topology from cfg.Sysfs and what the host isolated at
// boot (topology.DiscoverHost: sysfs, and the kernel command line under cfg.CoreSched.ProcRoot;
// sysfs alone when that is empty), and logs the isolation. An odd command line is a warning,
// never an error.
func discoverTopology(cfg Config, log *slog.Logger) (*topology.Topology, error) {
	topo, err := topology.DiscoverHost(cfg.Sysfs, cfg.CoreSched.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("read CPU topology: %w", err)
	}
	for _, w := range topo.Isolation.Warnings {
		log.Warn("host isolation", "warning", w)
	}
	if topo.Isolation.Any() {
		log.Info("host isolation", "cpus", topo.Isolation.Summary())
	}
	return topo, nil
}
