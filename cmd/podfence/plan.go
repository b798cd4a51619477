package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/example"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/manifest"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
)

type planFlags struct {
	topology   string
	pools      string
	labels     []string
	checkpoint string
	draState   string
	output     string
	cfsQuotas  plan.CFSQuotas
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan [POD-MANIFEST ...]",
		Short: "Show how a node's CPUs would be split between pods (dry run)",
		Long: `plan reads a node topology, a CPU-Pooler pool config and Pod manifests, and prints
what podfence would give each container: pool, CPUs and their placement, memory nodes, CFS
quota and environment, then pool utilisation, refusals and warnings.

With no arguments and no flags it runs an embedded example: a 2-socket SMT node, sample pools
and sample pods, one of which does not fit. Without --pools, on any other node it plans on a
pool layout derived from the node (default and shared_caas on the first cores, exclusive_dp
and exclusive_rt on whole cores after them, the latter on the cores the host isolated; as
many as fit); the header says so.`,
		Example: `  podfence plan
  podfence plan --topology host
  cat pods.yaml | podfence plan --topology host -
  podfence plan --topology host --pools /etc/podfence/pools pods.yaml
  podfence plan --topology sockets=2,numa=4,cores=64,threads=2 --pools poolconfig-a.yaml -o json pods.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlan(cmd.OutOrStdout(), f, args)
		},
	}
	cmd.Flags().StringVar(&f.topology, "topology", "",
		`node topology: "host" (this machine's /sys, and /proc/cmdline for the CPUs it isolated), a sysfs root `+
			`directory, or a synthetic spec such as "sockets=2,numa=4,cores=64,threads=2,isolcpus=2-7" (default: the example's)`)
	cmd.Flags().StringVar(&f.pools, "pools", "", "pool config: a poolconfig-*.yaml file or a directory of them (default: the example's on its node, else one derived from the node)")
	cmd.Flags().StringArrayVar(&f.labels, "node-label", nil, "node label key=value, matched against nodeSelector (repeatable)")
	cmd.Flags().StringVar(&f.checkpoint, "checkpoint", "", "start from the allocations recorded in this agent checkpoint directory")
	cmd.Flags().StringVar(&f.draState, "dra-state-dir", "", "plan DRA claims with the grants the DRA driver (podfence-dra) "+
		"prepared in this directory (a node's --dra-state-dir): a container gets what the grants of its pod's claims give")
	cmd.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	cmd.Flags().Var(&f.cfsQuotas, "cfs-quotas", cfsQuotasHelp)
	return cmd
}

func runPlan(out io.Writer, f planFlags, args []string) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("flag --output %q: want text or json", f.output)
	}
	topo, err := loadTopology(f.topology)
	if err != nil {
		return err
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return err
	}
	var configs []*pools.Config
	switch {
	case f.pools != "":
		if configs, err = pools.Load(f.pools); err != nil {
			return err
		}
	case isExampleNode(topo):
		cfg, err := pools.Parse("embedded "+example.PoolConfigName, example.PoolConfig)
		if err != nil {
			return err
		}
		configs = []*pools.Config{cfg}
		if len(f.labels) == 0 {
			labels = example.NodeLabels()
		}
	default:
		cfg, err := pools.Derive(topo, derivedPools)
		if err != nil {
			return fmt.Errorf("%w; or pass a pool config with --pools", err)
		}
		configs = []*pools.Config{cfg}
	}
	cfg, err := pools.Select(configs, labels)
	if err != nil {
		return err
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil && f.pools != "" {
		node := f.topology
		if node == "" {
			node = example.Topology + " (the default)"
		}
		return fmt.Errorf("pool config %s does not fit the node of --topology %s (%s): change the pools' cpus in %s, "+
			"or pass --topology for the node it is written for, or leave out --pools to plan on a layout derived from the node\n%w",
			cfg.Source, node, topo.Summary(), cfg.Source, err)
	} else if err != nil {
		return err
	}
	pods, err := readPods(args)
	if err != nil {
		return err
	}
	node := plan.NewNode(topo, layout, plan.Policy{CFSQuotas: f.cfsQuotas})
	st := plan.NewLedger(node)
	if f.checkpoint != "" {
		if err := restoreCheckpoint(f.checkpoint, node, st); err != nil {
			return err
		}
	}
	grants, err := readGrants(f.draState)
	if err != nil {
		return err
	}
	rep := node.PlanPods(st, pods, grants...)
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Node          string                   `json:"node"`
			Topology      string                   `json:"topology"`
			HostIsolation *topology.IsolationLists `json:"hostIsolation,omitempty"`
			Pools         string                   `json:"poolConfig"`
			plan.Report
		}{topo.Summary(), topo.Source, topo.Isolation.Lists(), layout.Source, rep})
	}
	return node.WriteText(out, rep)
}

// derivedPools is the Source of the layout plan derives from a node when no --pools is given.
const derivedPools = "derived from the node's topology, as no --pools was given (to plan with your own, write a " +
	"poolconfig.yaml as README.md's \"Writing a pool config\" says and pass --pools poolconfig.yaml)"

// isExampleNode says whether topo is the embedded example's node (as its synthetic spec, or
// a sysfs tree of the same shape), which plans on the embedded pool config.
func isExampleNode(topo *topology.Topology) bool {
	ex, err := topology.Synthetic(example.Topology)
	return err == nil && maps.Equal(topo.CPUs, ex.CPUs) && topo.Offline.IsEmpty() && !topo.Isolation.Any()
}

// restoreCheckpoint loads an agent checkpoint into st, refusing records that no longer fit.
func restoreCheckpoint(dir string, node *plan.Node, st *plan.Ledger) error {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("flag --checkpoint: %w", err)
	}
	store, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	allocs, err := store.Load()
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range checkpoint.Validate(allocs, node.Topology.Online(), node.PoolCPUs()) {
		errs = append(errs, fmt.Errorf("checkpoint %s: %s", filepath.Join(dir, c.File), c.Reason))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return st.Restore(allocs)
}

// readGrants lists the DRA grants in dir ("" for none); a grant that does not read stops the
// plan (the agent would refuse its containers).
func readGrants(dir string) ([]grant.Grant, error) {
	if dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("flag --dra-state-dir: %w", err)
	}
	grants, errs := grant.Store{Dir: dir}.List()
	return grants, errors.Join(errs...)
}

func loadTopology(v string) (*topology.Topology, error) {
	switch {
	case v == "":
		return topology.Synthetic(example.Topology)
	case v == "host":
		return topology.DiscoverHost("/sys", "/proc")
	case strings.Contains(v, "="):
		return topology.Synthetic(v)
	}
	st, err := os.Stat(v)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf(`flag --topology %q: want "host", a sysfs root directory, or a spec like "sockets=2,numa=4,cores=64,threads=2"`, v)
	}
	return topology.DiscoverHost(v, "") // a captured tree: the isolation sysfs shows, no command line
}

func parseLabels(kvs []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("flag --node-label %q: want key=value", kv)
		}
		labels[k] = v
	}
	return labels, nil
}

func readPods(files []string) ([]*corev1.Pod, error) {
	if len(files) == 0 {
		return manifest.ReadPods(bytes.NewReader(example.Pods), "embedded example pods")
	}
	var pods []*corev1.Pod
	for _, name := range files {
		r := io.Reader(os.Stdin)
		if name != "-" {
			fh, err := os.Open(name)
			if err != nil {
				return nil, fmt.Errorf("read pods: %w", err)
			}
			defer fh.Close()
			r = fh
		}
		p, err := manifest.ReadPods(r, name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p...)
	}
	return pods, nil
}
