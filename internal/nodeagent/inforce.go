package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
)

// inForceFile, in the checkpoint directory, is the pool layout the running containers were
// placed by, as a pool config. A config file changed while the agent was down (or while a
// change was pending) is then taken only as the NRI agent's Reload would take it.
const inForceFile = "pools-in-force.yaml"

// saveInForce records the layout in force, atomically.
func saveInForce(dir string, layout *pools.Node) error {
	var b strings.Builder
	b.WriteString("# The pool layout podfence's running containers were placed by (written by the agent).\npools:\n")
	for _, p := range layout.Pools {
		fmt.Fprintf(&b, "  %s: {cpus: %q, hyperThreadingPolicy: %s}\n", p.Name, p.CPUs.String(), p.HTPolicy)
	}
	tmp := filepath.Join(dir, inForceFile+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("record the pool layout in force: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, inForceFile)); err != nil {
		return fmt.Errorf("record the pool layout in force: %w", err)
	}
	return nil
}

// loadInForce reads the recorded layout in force for node's topology; nil if none. A
// record that no longer resolves (a CPU gone) is reported and ignored.
func loadInForce(dir string, node *plan.Node) (*plan.Node, error) {
	path := filepath.Join(dir, inForceFile)
	b, err := os.ReadFile(path)
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
	layout, err := pools.Resolve(cfg, node.Topology)
	if err != nil {
		return nil, fmt.Errorf("the pool layout in force: %w", err)
	}
	return plan.NewNode(node.Topology, layout, node.Policy), nil
}

// startLayout returns the layout to start the NRI agent with and the one to take after its
// first synchronisation (nil: none): the recorded layout in force when the config file now
// says otherwise, so that no running container is moved or has its CPUs handed out.
func startLayout(dir string, file *plan.Node, log interface{ Warn(string, ...any) }) (*plan.Node, *plan.Node) {
	inForce, err := loadInForce(dir, file)
	if err != nil {
		log.Warn("pool layout in force unusable; starting with the pool config file's", "err", err)
		return file, nil
	}
	if inForce == nil || layoutKey(inForce.Pools) == layoutKey(file.Pools) {
		return file, nil
	}
	log.Warn("pool config changed since the running containers were placed; it is taken once none would move",
		"inForce", describe(inForce.Pools), "poolConfig", describe(file.Pools))
	return inForce, file
}
