package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/regfile"
)

// inForceFile, in the checkpoint directory, is the pool layout the running containers were
// placed by, as a pool config. A config file changed while the agent was down (or while a
// change was pending) is then taken only as the NRI agent's Reload would take it.
const inForceFile = pools.InForceFile

// saveInForce records the layout in force, atomically.
func saveInForce(dir string, layout *pools.Node) error {
	var b strings.Builder
	b.WriteString("# The pool layout podfence's running containers were placed by (written by the agent).\n")
	b.WriteString(layout.ConfigText())
	tmp := filepath.Join(dir, inForceFile+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("record the pool layout in force: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, inForceFile)); err != nil {
		return fmt.Errorf("record the pool layout in force: %w", err)
	}
	return nil
}

// loadInForce reads the recorded layout in force for topo; nil if none. A record that no
// longer resolves (a CPU gone) is reported and ignored.
func loadInForce(dir string, topo *topology.Topology, policy plan.Policy) (*plan.Node, error) {
	path := filepath.Join(dir, inForceFile)
	b, err := regfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the pool layout in force: %w", err)
	}
	cfg, err := pools.Parse(path, b)
	if err != nil {
		return nil, fmt.Errorf("the pool layout in force: %w", err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		return nil, fmt.Errorf("the pool layout in force: %w", err)
	}
	return plan.NewNode(topo, layout, policy), nil
}

// startLayout returns the layout to start the NRI agent with and the one to take after its
// first synchronisation (nil: none): the recorded layout in force when the config file now
// says otherwise, so that no running container is moved or has its CPUs handed out.
func startLayout(dir string, file *plan.Node, log interface{ Warn(string, ...any) }) (*plan.Node, *plan.Node) {
	inForce, err := loadInForce(dir, file.Topology, file.Policy)
	if err != nil {
		log.Warn("pool layout in force unusable; starting with the pool config file's", "err", err)
		return file, nil
	}
	return pickStart(inForce, file, log)
}

func pickStart(inForce, file *plan.Node, log interface{ Warn(string, ...any) }) (*plan.Node, *plan.Node) {
	if inForce == nil || layoutKey(inForce.Pools) == layoutKey(file.Pools) {
		return file, nil
	}
	log.Warn("pool config changed since the running containers were placed; it is taken once none would move",
		"inForce", describe(inForce.Pools), "poolConfig", describe(file.Pools))
	return inForce, file
}

// startNodes reads the topology and returns the layout to serve with at start, the one to
// take after the first synchronisation (nil: none; see startLayout) and the pool config's.
//
// When the labels come from the API server (cfg.live), it first waits for their first read:
// up to wait on a node without a layout in force, up to waitInForce on one with it, and no
// longer once the API server refused a read (403, 404: retried in the background). The agent
// is not connected to the runtime meanwhile, so no container creation waits on it (the
// runtime creates containers without it, as when it is not running; the next Synchronize
// takes them in). Labels still unknown after that:
//   - with a layout in force, the agent serves with it, and the pool config is selected
//     once the labels are read: file is then the layout in force;
//   - without one, the config is selected by kubernetes.io/hostname alone; if none matches,
//     that is the error, naming the API server's.
//
// Either way a config selected later by the read labels is taken as a pool config change
// (the NRI agent's Reload: pending while a running container would move).
func startNodes(ctx context.Context, cfg Config, wait, waitInForce time.Duration, log *slog.Logger) (start, next, file *plan.Node,
	err error) {
	topo, err := discoverTopology(cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	inForce, err := loadInForce(cfg.CheckpointDir, topo, cfg.Policy)
	if err != nil {
		log.Warn("pool layout in force unusable; starting with the pool config file's", "err", err)
		inForce = nil
	}
	var labelErr error
	if cfg.live != nil {
		d := wait
		if inForce != nil {
			d = waitInForce
		}
		if !cfg.live.wait(ctx, d) {
			labelErr = cfg.live.lastError()
			if labelErr == nil {
				labelErr = fmt.Errorf("no answer in %s", d)
			}
			if inForce != nil {
				log.Warn("node labels not read from the API server yet: serving with the pool layout in force; the pool config is "+
					"selected once they are read", "err", labelErr, "inForce", describe(inForce.Pools))
				return inForce, nil, inForce, nil
			}
			log.Warn("node labels not read from the API server yet: selecting the pool config by "+HostnameLabel+
				" alone until they are read", "err", labelErr)
		}
	}
	file, err = loadLayout(cfg, topo, log)
	if err != nil {
		if labelErr != nil {
			err = fmt.Errorf("%w (the node's labels could not be read from the API server: %v)", err, labelErr)
		}
		return nil, nil, nil, err
	}
	start, next = pickStart(inForce, file, log)
	return start, next, file, nil
}
