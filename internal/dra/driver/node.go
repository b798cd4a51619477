package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/regfile"
)

// source reads what the driver publishes as the node agent reads it: the topology from
// sysfs, the pool config selected by the node's labels (from the API server, plus the
// hostname label) and resolved on it, and the SGX EPC capacity.
type source struct {
	cfg    Config
	client kubernetes.Interface
	loader pools.Loader
	labels map[string]string // last read; used when a read fails
}

// view is one reading of the node.
type view struct {
	inv    *dra.Inventory
	topo   *topology.Topology
	layout *pools.Node
	epc    string // where the EPC capacity came from
}

func (s *source) read(ctx context.Context) (view, error) {
	// The isolation sysfs shows: CPUs isolcpus= took out of load balancing leave the shared
	// and default pools, as in the agent.
	topo, err := topology.DiscoverHost(s.cfg.Sysfs, "")
	if err != nil {
		return view{}, fmt.Errorf("read CPU topology: %w", err)
	}
	configs, err := s.loader.Load(s.cfg.PoolConfig)
	if err != nil {
		return view{}, err
	}
	labels, err := s.nodeLabels(ctx)
	if err != nil {
		return view{}, err
	}
	sel, err := pools.Select(configs, labels)
	if err != nil {
		return view{}, fmt.Errorf("node %q: %w", s.cfg.NodeName, err)
	}
	layout, err := pools.Resolve(sel, topo)
	if err != nil {
		return view{}, fmt.Errorf("node %q: %w", s.cfg.NodeName, err)
	}
	if layout, err = s.inForce(layout, topo); err != nil {
		return view{}, err
	}
	epc, from := s.cfg.EPCBytes, "--epc-capacity"
	if epc < 0 {
		epc, from = readEPCCapacity(s.cfg.CgroupRoot)
	}
	inv, err := dra.NewInventory(topo, layout, epc)
	if err != nil {
		return view{}, err
	}
	return view{inv: inv, topo: topo, layout: layout, epc: from}, nil
}

// inForce returns the agent's layout in force when its record (Config.InForce) exists and
// differs from selected, the layout the pool config gives: the agent serves that one until
// the containers placed by it end, so publishing the new config's CPUs would offer CPUs the
// agent still gives to others. Without a record, selected.
func (s *source) inForce(selected *pools.Node, topo *topology.Topology) (*pools.Node, error) {
	if s.cfg.InForce == "" {
		return selected, nil
	}
	b, err := regfile.ReadFile(s.cfg.InForce)
	if errors.Is(err, fs.ErrNotExist) {
		return selected, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the agent's pool layout in force: %w", err)
	}
	cfg, err := pools.Parse(s.cfg.InForce, b)
	if err != nil {
		return nil, fmt.Errorf("the agent's pool layout in force: %w", err)
	}
	inForce, err := pools.Resolve(cfg, topo)
	if err != nil {
		return nil, fmt.Errorf("the agent's pool layout in force: %w", err)
	}
	if inForce.ConfigText() == selected.ConfigText() {
		return selected, nil
	}
	inForce.Source = s.cfg.InForce + " (pool config " + selected.Source + " pending in the agent)"
	return inForce, nil
}

// nodeLabels reads the Node's labels; after a failed read the last ones read, if any.
func (s *source) nodeLabels(ctx context.Context) (map[string]string, error) {
	if s.client != nil {
		n, err := s.client.CoreV1().Nodes().Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
		switch {
		case err == nil:
			s.labels = maps.Clone(n.Labels)
		case s.labels == nil:
			return nil, fmt.Errorf("read the labels of node %q (they select the pool config): %w", s.cfg.NodeName, err)
		}
	}
	labels := maps.Clone(s.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if _, ok := labels[v1.LabelHostname]; !ok {
		labels[v1.LabelHostname] = s.cfg.NodeName
	}
	return labels, nil
}

// readEPCCapacity reads sgx_epc from the misc controller's misc.capacity under the cgroup
// root: 0 and the reason when the node has none.
func readEPCCapacity(root string) (int64, string) {
	l, err := cgroups.Detect(root)
	if err != nil {
		return 0, err.Error()
	}
	dir, err := l.Dir("misc", "/")
	if err != nil {
		return 0, err.Error()
	}
	file := filepath.Join(dir, "misc.capacity")
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, file + " missing"
	}
	if err != nil {
		return 0, err.Error()
	}
	caps, err := cgroups.ParseFlat(b)
	if err != nil {
		return 0, fmt.Sprintf("%s: %v", file, err)
	}
	n, ok, err := caps.Uint("sgx_epc")
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s: %v", file, err)
	case !ok:
		return 0, file + " lists no sgx_epc"
	case n > math.MaxInt64:
		return 0, fmt.Sprintf("%s: sgx_epc %d is out of range", file, n)
	}
	return int64(n), file
}
