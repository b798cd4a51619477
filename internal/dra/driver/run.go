package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
)

// Config is what Run needs.
type Config struct {
	NodeName   string
	PoolConfig string // a pool config file, or a directory of poolconfig-*.yaml (the agent's --pools)
	// StateDir holds the grants, in StateDir/claims (the node agent reads them there).
	StateDir string
	CDIDir   string // the runtime's CDI spec directory
	// PluginsDir is the kubelet's plugins directory: the DRA socket is in PluginsDir/<driver name>.
	PluginsDir  string
	RegistryDir string // the kubelet's plugin registration directory
	Sysfs       string // sysfs root ("/sys")
	CgroupRoot  string // cgroupfs root, for misc.capacity when EPCBytes < 0
	// InForce is the agent's record of the pool layout in force (pools.InForceFile in its
	// checkpoint directory): while it differs from the pool config the node's labels select
	// (a change the agent has not taken yet: containers still hold CPUs of the old layout),
	// the driver publishes the layout in force. Empty or missing: the pool config.
	InForce string
	// EPCBytes is the node's SGX EPC; < 0: read it from misc.capacity.
	EPCBytes int64
	// ReloadInterval is how often the topology, pool config and node labels are read again
	// and the slices republished when the devices changed; 0: only at start.
	ReloadInterval time.Duration
	Client         kubernetes.Interface
}

// ClaimsDir is the grant store's directory under a state directory.
func ClaimsDir(stateDir string) string { return filepath.Join(stateDir, "claims") }

// Run serves the kubelet plugin until ctx ends: it reads the node, restores the CDI spec files
// of the stored grants and watches their claims, registers with the kubelet, publishes the
// node's ResourceSlices and republishes them when a reload finds other devices. It returns
// nil when ctx ends, or the error that stopped it, once its watches have stopped.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.NodeName == "" || cfg.Client == nil {
		return errors.New("DRA driver: a node name and an API server client are needed")
	}
	src := &source{cfg: cfg, client: cfg.Client}
	v, err := src.read(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kctx := klog.NewContext(ctx, logr.FromSlogHandler(log.Handler()))
	d := &Driver{node: cfg.NodeName, store: grant.Store{Dir: ClaimsDir(cfg.StateDir)}, cdi: cdiDir(cfg.CDIDir),
		log: log, cancel: cancel, inv: v.inv}
	d.claims = newClaimWatch(kctx, cfg.Client, d.syncPods)
	defer func() { cancel(nil); d.claims.wait() }() // after the helper stopped: no prepare adds a watch
	d.restore()
	pluginDir := filepath.Join(cfg.PluginsDir, dra.DriverName)
	for _, dir := range []string{pluginDir, cfg.RegistryDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("DRA driver: %w", err)
		}
	}
	helper, err := kubeletplugin.Start(kctx, d, kubeletplugin.DriverName(dra.DriverName), kubeletplugin.KubeClient(cfg.Client),
		kubeletplugin.NodeName(cfg.NodeName), kubeletplugin.PluginDataDirectoryPath(pluginDir),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistryDir), kubeletplugin.HealthService(false))
	if err != nil {
		return fmt.Errorf("DRA driver: start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := publish(ctx, helper, cfg.NodeName, v, log, "start"); err != nil {
		return orCause(ctx, err)
	}
	if cfg.ReloadInterval <= 0 {
		<-ctx.Done()
		return cause(ctx)
	}
	tick := time.NewTicker(cfg.ReloadInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return cause(ctx)
		case <-tick.C:
		}
		next, err := src.read(ctx)
		if err != nil {
			log.Warn("reload: the devices published stay as they are", "err", err)
			continue
		}
		if reflect.DeepEqual(next.inv.Devices(), d.inventory().Devices()) {
			continue
		}
		d.mu.Lock()
		d.inv = next.inv
		d.mu.Unlock()
		if err := publish(ctx, helper, cfg.NodeName, next, log, "reload"); err != nil {
			return orCause(ctx, err)
		}
	}
}

// cause is nil when ctx ended from outside (a signal), else why Run stopped itself.
func cause(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return nil
}

// orCause is err, or cause(ctx) when ctx ended meanwhile (publishing waits for an informer).
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cause(ctx)
	}
	return err
}

// publish hands the node's slices to the helper, which writes them to the API server: one
// pool named after the node, one slice per MaxSliceDevices devices, an empty slice when
// there is no device (the driver runs, with nothing to offer).
func publish(ctx context.Context, h *kubeletplugin.Helper, node string, v view, log *slog.Logger, why string) error {
	devs := v.inv.Devices()
	chunks := dra.Chunks(devs)
	if len(chunks) == 0 {
		chunks = [][]resourceapi.Device{nil}
	}
	var slices []resourceslice.Slice
	for _, c := range chunks {
		slices = append(slices, resourceslice.Slice{Devices: c})
	}
	if err := h.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{node: {Slices: slices}}}); err != nil {
		return fmt.Errorf("DRA driver: publish ResourceSlices: %w", err)
	}
	shared, epc := "none", "none"
	if v.inv.Shared != nil {
		shared = fmt.Sprintf("%s (%d millicpu)", v.inv.Shared.Pool, v.inv.Shared.MilliCPU)
	}
	if v.inv.EPCBytes > 0 {
		epc = fmt.Sprintf("%d bytes", v.inv.EPCBytes)
	}
	log.Info("publishing", "why", why, "node", node, "topology", v.topo.Summary(), "poolConfig", v.layout.Source,
		"devices", len(devs), "cpuUnits", len(v.inv.Units), "shared", shared, "epc", epc, "epcFrom", v.epc)
	return nil
}

// restore makes the CDI spec files agree with the stored grants: every grant's file is
// written (a node reboot empties /var/run/cdi, and the kubelet then prepares its claims
// again) and files of claims without a grant are removed. Every grant's claim is watched
// again (its reserved pods may have changed while the driver was down). A grant whose CPUs
// the devices published now do not hold is reported: its containers keep them.
func (d *Driver) restore() {
	grants, errs := d.store.List()
	for _, err := range errs {
		d.log.Warn("unreadable grant", "err", err)
	}
	have := map[string]bool{}
	d.watchGrants(grants)
	for _, g := range grants {
		have[g.ClaimUID] = true
		if err := d.cdi.write(g.ClaimUID); err != nil {
			d.log.Warn("restore CDI spec", "claim", g.ClaimUID, "err", err)
		}
		if gone := g.CPUs().Difference(d.inv.CPUs()); !gone.IsEmpty() {
			d.log.Warn("prepared claim holds CPUs no device publishes now (the pool config or CPUs changed)",
				"claim", g.Namespace+"/"+g.Name, "uid", g.ClaimUID, "cpus", gone.String())
		}
	}
	uids, err := d.cdi.claims()
	if err != nil {
		d.log.Warn("list CDI specs", "err", err)
	}
	for _, uid := range uids {
		if !have[uid] && len(errs) == 0 { // an unreadable grant may be this claim's
			if err := d.cdi.remove(uid); err != nil {
				d.log.Warn("remove CDI spec of a claim without a grant", "claim", uid, "err", err)
			}
		}
	}
	d.log.Info("prepared claims", "dir", d.store.Dir, "grants", len(grants), "unreadable", len(errs))
}
