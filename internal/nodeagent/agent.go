// Package agent wires podfence's node agent (`podfence agent`): it reads the node's CPU
// topology and pool config, opens the checkpoint and serves the runtime as an NRI plugin
// (package nri) until its context ends.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	csenforce "github.com/podfence/podfence/internal/coresched/enforce"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/epc/enforce"
	"github.com/podfence/podfence/internal/kube/authz"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/deviceplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/metrics"
	"github.com/podfence/podfence/internal/sandbox"
	vmenforce "github.com/podfence/podfence/internal/sandbox/enforce"
	"github.com/podfence/podfence/internal/sandbox/host"
)

// HostnameLabel is the node label the agent sets from NodeName when it is not given.
const HostnameLabel = "kubernetes.io/hostname"

// DefaultDRAStateDir is where podfence-dra keeps its grants: beside the checkpoint, under the
// agent's /var/lib/podfence.
const DefaultDRAStateDir = "/var/lib/podfence/dra/claims"

// Config is what the agent needs to run.
type Config struct {
	nriplugin.Connection
	// Pools is a pool config file or a directory of poolconfig-*.yaml (a mounted ConfigMap).
	Pools string
	// PoolsReloadInterval is how often Pools is re-read; a change is taken when no running
	// container would move (0: never; negative is an error).
	PoolsReloadInterval time.Duration
	// NodeName and NodeLabels select the pool config (its nodeSelector). Without NodeLabels,
	// the agent reads its Node's labels from the API server (Kubeconfig or the pod's service
	// account) and follows their changes (nodelabels.go).
	NodeName   string
	NodeLabels map[string]string
	// PodResourcesSocket is the kubelet's pod resources API: the pools of containers whose pod
	// has no pool request annotation come from their devices there (package podresources).
	// Empty: not read.
	PodResourcesSocket string
	// CheckpointDir holds one record per allocation.
	CheckpointDir string
	// DRAStateDir is the DRA driver's grant store (package dra/grant; podfence-dra's
	// --state-dir): containers whose environment names a DRA claim get what its grant gives.
	// Empty: such containers are refused.
	DRAStateDir string
	// Sysfs is the root of the sysfs tree to read the topology from ("/sys").
	Sysfs string
	// StartBinary, if set, is the host path of the podfence binary that wraps containers
	// with a process pinning annotation (see Starter).
	StartBinary string
	// Extensions ride on the agent's events after the Starter and the EPC limits (see nriplugin.Extension).
	Extensions []nriplugin.Extension
	// CgroupRoot is the cgroupfs mount point ("/sys/fs/cgroup"): SGX EPC limits are applied
	// there with policy EPCPolicy (package epc/enforce). Empty: no EPC limits.
	CgroupRoot string
	EPCPolicy  epc.Policy
	// EPCApplyAt is when a cap is set on cgroup v2 (epc.ApplyAt; start beside a later NRI
	// plugin that sets misc.max, such as nri-plugins sgx-epc).
	EPCApplyAt epc.ApplyAt
	// Registry collects the agent's metrics; nil means a new metrics.NewRegistry().
	Registry *prometheus.Registry
	// MetricsAddress, if set, serves /metrics, /healthz, /readyz and /state (package
	// metrics; the report of package status).
	MetricsAddress string
	// MetricsAuth guards /metrics and /state: AuthKubernetes reviews bearer tokens with the
	// API server (package authz; Kubeconfig or the pod's service account), over HTTPS with
	// MetricsCert and MetricsKey or a self-signed certificate; AuthNone ("") serves a
	// loopback MetricsAddress only.
	MetricsAuth             metrics.Auth
	MetricsCert, MetricsKey string
	// HealthAddress, if set, serves /healthz and /readyz alone, plain HTTP (metrics.ListenHealth):
	// a loopback address the kubelet probes, which no client of the network can flood.
	HealthAddress string
	// Events posts Kubernetes Events on pods for refusals and degraded enforcement, to the
	// API server of Kubeconfig or, if that is empty, of the pod the agent runs in (package
	// events; reporter.go).
	Events     bool
	Kubeconfig string
	// DevicePluginDir, if set, is the kubelet's device-plugin directory: each exclusive and
	// shared pool is advertised there as <domain>/<pool> (package deviceplugin; not the pools
	// with requestAPI: dra), the domain being the pool config's resourceBaseName, else
	// ResourceDomain.
	DevicePluginDir string
	ResourceDomain  string
	// Policy holds the planner's node-wide settings (CFS quotas: --cfs-quotas).
	Policy plan.Policy

	// CoreSched is SMT core scheduling (package coresched): cookies per pod group. Its
	// CgroupRoot defaults to CgroupRoot's.
	CoreSched csenforce.Config

	// PublishNode labels and annotates the Node (NodeName) with its core-scheduling support
	// and physical cores for the scheduler extender (package nodeinfo), through Kubeconfig or
	// the pod's service account; skipped when neither reaches an API server.
	PublishNode bool

	// Isolation keeps interrupts, the load balancer and unbound kernel work off exclusive CPUs
	// of containers that ask (isolation.go).
	Isolation Isolation

	// VMRuntimes are the runtime handlers (names or globs, e.g. kata, kata-*) of VM
	// sandboxes, whose shim and hypervisor get a host cgroup under CgroupRoot sized from
	// their pods (package sandbox/enforce). Empty: none.
	VMRuntimes []string

	live *nodeLabels // set by Run when the labels come from the API server
}

// Run serves the runtime until ctx ends, then flushes the checkpoint.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := checkReloadInterval(cfg.PoolsReloadInterval); err != nil {
		return fmt.Errorf("pools reload interval %s: %w", cfg.PoolsReloadInterval, err)
	}
	var labelsDone sync.WaitGroup
	defer labelsDone.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api, err := apiClient(cfg, log) // one client for Events, node info and labels (apiserver.go)
	if err != nil {
		return err
	}
	if cfg.live = newNodeLabels(cfg, api, log); cfg.live != nil {
		labelsDone.Go(func() { cfg.live.run(ctx) })
	} else if labelsFromAPI(cfg) {
		log.Info("node labels not read from the API server (no client): the pool config is selected by " + HostnameLabel + " alone")
	}
	// The layout the running containers were placed by comes first; a changed config file
	// is taken as Reload takes it (inforce.go). node is the pool config's layout.
	start, next, node, err := startNodes(ctx, cfg, labelStartWait, labelStartWaitInForce, log)
	if err != nil {
		return err
	}
	store, err := checkpoint.Open(cfg.CheckpointDir)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", cfg.CheckpointDir, err)
	}
	var exts []nriplugin.Extension
	if cfg.StartBinary != "" {
		exts = append(exts, Starter{Binary: cfg.StartBinary})
	}
	reg := cfg.Registry
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	if cfg.CgroupRoot != "" {
		x := enforce.New(enforce.Config{Root: cfg.CgroupRoot, Policy: cfg.EPCPolicy, ApplyAt: cfg.EPCApplyAt}, log)
		if err := reg.Register(x.Collector()); err != nil {
			return fmt.Errorf("register EPC metrics: %w", err)
		}
		exts = append(exts, x)
	}
	if cfg.CgroupRoot != "" && len(cfg.VMRuntimes) > 0 {
		x, err := vmSandboxes(cfg, node, reg, log)
		if err != nil {
			return err
		}
		exts = append(exts, x)
	}
	// SMT core scheduling (package coresched; see coresched.go).
	cs, err := coreSched(ctx, cfg, reg, log)
	if err != nil {
		return err
	}
	exts = append(exts, cs)
	var plugin atomic.Pointer[nriplugin.Plugin] // set below; the isolation manager asks it for the layout in force
	iso, err := isolation(ctx, cfg, func() *plan.Node {
		if p := plugin.Load(); p != nil {
			return p.Node()
		}
		return nil
	}, reg, log)
	if err != nil {
		return err
	}
	exts = append(exts, iso)
	if cfg.PublishNode { // for the scheduler extender; never blocks (package nodeinfo)
		cores := len(node.Topology.Cores())
		nodeinfo.Start(ctx, api, cfg.NodeName, func() nodeinfo.Info {
			r, _ := cs.State().(csenforce.Report)
			return nodeinfo.Info{CoreSched: r.Supported, PhysicalCores: cores}
		}, log.With("component", "nodeinfo"))
	}

	exts = append(exts, cfg.Extensions...)
	o, err := newReporter(cfg, node, reg, api, log) // report, pool metrics, Events (reporter.go)
	if err != nil {
		return err
	}
	checkCheckpoint(store, start, log)
	if err := saveInForce(cfg.CheckpointDir, start.Pools); err != nil {
		log.Error("pool layout in force not recorded", "err", err)
	}
	kubelet, closeKubelet, err := podResources(cfg, log) // the devices of pods without a pool request (podresources.go)
	if err != nil {
		return err
	}
	defer closeKubelet()
	var dp *deviceplugin.Plugin
	a := nriplugin.New(start, store, log, nriplugin.Options{Extensions: append(exts, o), Next: next, PodResources: kubelet,
		DRAStateDir: cfg.DRAStateDir,
		LayoutChanged: func(n *plan.Node) {
			if err := saveInForce(cfg.CheckpointDir, n.Pools); err != nil {
				log.Error("pool layout in force not recorded", "err", err)
			}
			if dp != nil {
				if err := dp.Reload(n); err != nil {
					log.Error("device plugin: pool config reload", "err", err)
				}
			}
			log.Info("pool layout in force", "poolConfig", n.Pools.Source, "pools", describe(n.Pools))
		}})
	plugin.Store(a)
	endpoints, err := o.attach(a)
	if err != nil {
		return err
	}
	if cfg.MetricsAddress != "" {
		sec := metrics.Security{Auth: cfg.MetricsAuth, CertFile: cfg.MetricsCert, KeyFile: cfg.MetricsKey}
		if sec.Auth == metrics.AuthKubernetes {
			if api == nil {
				return fmt.Errorf("flag --metrics-auth=kubernetes: no API server to review tokens (not in a pod and no " +
					"--kubeconfig); give --kubeconfig, or --metrics-auth=none with a loopback --metrics-address")
			}
			sec.Guard = authz.New(api, authz.Options{}, log.With("component", "metrics")).Wrap
		}
		srv, err := metrics.Listen(cfg.MetricsAddress, reg, log, append(endpoints, metrics.WithSecurity(sec))...)
		if err != nil {
			return err
		}
		defer closeMetrics(srv, log)
	}
	if cfg.HealthAddress != "" {
		srv, err := metrics.ListenHealth(cfg.HealthAddress, log, endpoints...)
		if err != nil {
			return err
		}
		defer closeMetrics(srv, log)
	}
	go o.run(ctx, a)
	var dpDone <-chan error
	dp, dpDone, err = startDevicePlugin(ctx, cancel, cfg, start, log)
	if err != nil {
		return err
	}
	if cfg.PoolsReloadInterval > 0 || cfg.live != nil {
		go watchPools(ctx, cfg, node, []reloader{a}, cfg.PoolsReloadInterval, log)
	}
	go newOnlineWatch(cfg.Sysfs, node.Topology.Isolation).run(ctx, a, onlineEvery, log)
	runErr := a.Run(ctx, cfg.Connection)
	cancel()
	releaseIsolation(context.Background(), cfg, api, iso, log)
	if err := <-dpDone; err != nil {
		runErr = errors.Join(runErr, err)
	}
	if err := a.Close(); err != nil {
		return errors.Join(runErr, fmt.Errorf("shutdown: %w", err))
	}
	log.Info("stopped")
	return runErr
}

// closeMetrics stops the metrics server, giving scrapes in flight a few seconds.
func closeMetrics(srv *metrics.Server, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		log.Warn("metrics server", "err", err)
	}
}

// LoadNode reads the topology and selects and resolves the node's pool config.
func LoadNode(cfg Config, log *slog.Logger) (*plan.Node, error) {
	topo, err := discoverTopology(cfg, log)
	if err != nil {
		return nil, err
	}
	return loadLayout(cfg, topo, log)
}

// loadLayout selects and resolves the node's pool config on topo.
func loadLayout(cfg Config, topo *topology.Topology, log *slog.Logger) (*plan.Node, error) {
	layout, err := resolvePools(nil, cfg, topo)
	if err != nil {
		return nil, err
	}
	for _, w := range layout.Warnings {
		log.Warn("pool config", "source", layout.Source, "warning", w)
	}
	log.Info("node", "name", cfg.NodeName, "topology", topo.Summary(), "poolConfig", layout.Source,
		"pools", describe(layout))
	return plan.NewNode(topo, layout, cfg.Policy), nil
}

// resolvePools loads the pool configs through loader (nil: no memory of earlier loads) and
// resolves the one for this node.
func resolvePools(loader *pools.Loader, cfg Config, topo *topology.Topology) (*pools.Node, error) {
	configs, err := loader.Load(cfg.Pools)
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(cfg.NodeLabels)
	if cfg.live != nil {
		if m, ok := cfg.live.current(); ok {
			labels = m
		}
	}
	if labels == nil {
		labels = map[string]string{}
	}
	if _, ok := labels[HostnameLabel]; !ok && cfg.NodeName != "" {
		labels[HostnameLabel] = cfg.NodeName
	}
	sel, err := pools.Select(configs, labels)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", cfg.NodeName, err)
	}
	layout, err := pools.Resolve(sel, topo)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", cfg.NodeName, err)
	}
	return layout, nil
}

// describe is a layout in one line: "default=0,8 exclusive_a=2-3(multiThreaded) ...".
func describe(layout *pools.Node) string {
	var desc []string
	for _, p := range layout.Pools {
		desc = append(desc, fmt.Sprintf("%s=%s", p.Name, p.CPUs))
	}
	return strings.Join(desc, " ")
}

// checkCheckpoint reports records that are unreadable or no longer fit the node. They are
// not fatal: at Synchronize, containers keep what they run on (unreadable records' containers
// are rebuilt from the runtime's cpusets) and records of gone containers are dropped.
func checkCheckpoint(store *checkpoint.Store, node *plan.Node, log *slog.Logger) {
	recs, err := store.Load() // the readable records, even with an error
	if err != nil {
		log.Warn("checkpoint records unreadable; the runtime's cpusets will be used for their containers", "err", err)
	}
	for _, c := range checkpoint.Validate(recs, node.Topology.Online(), node.PoolCPUs()) {
		log.Warn("checkpoint record does not fit the node", "file", c.File, "reason", c.Reason)
	}
	log.Info("checkpoint", "dir", store.Dir(), "records", len(recs))
}

// vmSandboxes builds the VM sandbox extension. A sandbox without containers runs on the
// default pool of the pool config the agent started with.
func vmSandboxes(cfg Config, node *plan.Node, reg prometheus.Registerer, log *slog.Logger) (*vmenforce.Extension, error) {
	rts, err := sandbox.ParseRuntimes(cfg.VMRuntimes)
	if err != nil {
		return nil, fmt.Errorf("VM runtimes: %w", err)
	}
	proc := cfg.CoreSched.ProcRoot
	if proc == "" {
		proc = "/proc"
	}
	if why := host.MigrationBlocked(proc); why != "" {
		log.Warn("VM sandboxes cannot be placed", "reason", why)
	}
	x := vmenforce.New(vmenforce.Config{Root: cfg.CgroupRoot, Proc: proc, Runtimes: rts, EmptyCPUs: node.Pools.Default.CPUs}, log)
	if err := reg.Register(x.Collector()); err != nil {
		return nil, fmt.Errorf("register VM sandbox metrics: %w", err)
	}
	return x, nil
}
