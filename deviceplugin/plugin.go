// Package deviceplugin advertises a node's CPU pools to the kubelet as extended resources,
// through the device plugin API v1beta1
// (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).
//
// Each exclusive and shared pool is one resource <domain>/<pool> (domain podfence.io, or
// nokia.k8s.io for CPU-Pooler workloads), served by its own gRPC server on a unix socket
// podfence-<pool>.sock in the kubelet's device-plugin dir and registered with the kubelet at
// <dir>/kubelet.sock. The default pool is not advertised.
//
//   - Exclusive pool: one device per CPU, ID = CPU ID ("12"), with the CPU's NUMA node as
//     TopologyInfo. Under singleThreaded, one device per physical core (its lowest pool
//     thread): the container gets that thread and the agent keeps the siblings idle, so the
//     kubelet's count matches what the pool can hold. GetPreferredAllocation answers with the
//     allocator's choice (package allocate: whole cores, one NUMA node, packed). Allocate
//     returns EXCLUSIVE_CPUS=12,13 and the container annotation podfence.io/exclusive-cpus
//     ("12-13"), which the NRI agent takes as the container's exact CPUs.
//   - Shared pool: one device per millicpu, IDs <pool>-0 … <pool>-<1000·CPUs-1>, with the
//     pool's NUMA node as TopologyInfo when it has one (none when it spans several). Allocate
//     returns SHARED_CPUS, the pool's CPUs.
//
// Health: a device is Unhealthy while its CPU is offline (the shared pool keeps 1000 healthy
// devices per online CPU); see Options.Online and Plugin.SetOnline.
//
// Run re-serves and re-registers when the kubelet restarts: it checks the dir every
// PollInterval for a re-created kubelet.sock or a removed own socket (the kubelet clears
// the dir when it starts).
package deviceplugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/podfence/podfence/plan"
	"github.com/podfence/podfence/pools"
	"github.com/podfence/podfence/topology"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"
)

// KubeletSocket is the kubelet's registration socket in the device-plugin dir.
const KubeletSocket = "kubelet.sock"

// maxSocketPath is the longest unix socket path Linux takes (sun_path less its NUL).
const maxSocketPath = 107

// Options configure the device plugin. The zero value is the kubelet's defaults.
type Options struct {
	// Dir is the kubelet's device-plugin dir (pluginapi.DevicePluginPath if empty).
	Dir string
	// Domain names the resources <Domain>/<pool>: pools.DefaultDomain (if empty) or
	// pools.CPUPoolerDomain. One domain only: two resources over the same CPUs would let the
	// kubelet hand a CPU out twice.
	Domain string
	// Online, if set, is read every PollInterval: devices of CPUs not in it are Unhealthy.
	Online func() (cpuset.CPUSet, error)
	// PollInterval is how often Run checks the kubelet socket and Online (1s if 0).
	PollInterval time.Duration
}

// Plugin serves a node's pools to the kubelet. Create it with New; call Run once.
type Plugin struct {
	opts Options
	log  *slog.Logger
	res  []*resource
}

// New prepares one resource per exclusive and shared pool of node.
func New(node *plan.Node, opts Options, log *slog.Logger) (*Plugin, error) {
	if opts.Dir == "" {
		opts.Dir = pluginapi.DevicePluginPath
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("device plugin dir %q: %w", opts.Dir, err)
	}
	opts.Dir = dir
	if opts.Domain == "" {
		opts.Domain = pools.DefaultDomain
	}
	if !slices.Contains(pools.Domains(), opts.Domain) {
		return nil, fmt.Errorf("device plugin resource domain %q: want one of %v", opts.Domain, pools.Domains())
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	p := &Plugin{opts: opts, log: log, res: newResources(node, opts.Domain)}
	for _, r := range p.res {
		if path := filepath.Join(dir, socketName(r)); len(path) > maxSocketPath {
			return nil, fmt.Errorf("socket path %s of %s is %d bytes, over the unix socket limit of %d: use a shorter device plugin dir",
				path, r.name, len(path), maxSocketPath)
		}
	}
	return p, nil
}

// SysfsOnline returns an Options.Online that reads the online CPUs from the sysfs tree at
// root ("/sys"): <root>/devices/system/cpu/online.
func SysfsOnline(root string) func() (cpuset.CPUSet, error) {
	path := filepath.Join(root, "devices", "system", "cpu", "online")
	return func() (cpuset.CPUSet, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return cpuset.New(), fmt.Errorf("read online CPUs: %w", err)
		}
		cpus, err := topology.ParseCPUList(string(data))
		if err != nil {
			return cpuset.New(), fmt.Errorf("read online CPUs from %s: %w", path, err)
		}
		return cpus, nil
	}
}

func socketName(r *resource) string { return "podfence-" + r.pool.Name + ".sock" }

// Resources returns the advertised resource names, sorted.
func (p *Plugin) Resources() []string {
	names := make([]string, len(p.res))
	for i, r := range p.res {
		names[i] = r.name
	}
	return names
}

// SetOnline marks the devices of CPUs not in online Unhealthy (and the others Healthy) and
// sends the change to the kubelet's ListAndWatch streams. Safe to call at any time.
func (p *Plugin) SetOnline(online cpuset.CPUSet) {
	for _, r := range p.res {
		if r.setOnline(online) {
			p.log.Info("device health changed", "resource", r.name,
				"onlineCPUs", online.Intersection(r.pool.CPUs).String(), "offlineCPUs", r.pool.CPUs.Difference(online).String())
		}
	}
}

// Run serves every resource and keeps it registered with the kubelet until ctx ends, then
// stops the servers and removes their sockets. It returns an error only when a server
// cannot start; a missing or failing kubelet is waited for. With no pool to advertise it
// returns nil at once.
func (p *Plugin) Run(ctx context.Context) error {
	if len(p.res) == 0 {
		p.log.Info("no exclusive or shared pool: nothing to advertise")
		return nil
	}
	eps := make([]*endpoint, len(p.res))
	defer func() {
		for _, e := range eps {
			if e != nil {
				e.stop()
			}
		}
	}()
	for i, r := range p.res {
		eps[i] = &endpoint{res: r, log: p.log.With("resource", r.name), dir: p.opts.Dir, name: socketName(r)}
		if err := eps[i].serve(); err != nil {
			return err
		}
	}
	tick := time.NewTicker(p.opts.PollInterval)
	defer tick.Stop()
	var onlineErr string
	for {
		p.sync(ctx, eps)
		if p.opts.Online != nil {
			online, err := p.opts.Online()
			if err != nil && err.Error() != onlineErr {
				p.log.Warn("read online CPUs; device health unchanged", "err", err)
			} else if err == nil {
				p.SetOnline(online)
			}
			onlineErr = errText(err)
		}
		select {
		case <-ctx.Done():
			p.log.Info("device plugins stopped")
			return nil
		case <-tick.C:
		}
	}
}

// sync serves again each endpoint whose socket is gone and registers each endpoint not yet
// registered with the kubelet socket now in the dir.
func (p *Plugin) sync(ctx context.Context, eps []*endpoint) {
	kubeletSock := filepath.Join(p.opts.Dir, KubeletSocket)
	kubelet := statID(kubeletSock)
	for _, e := range eps {
		if !e.alive() {
			e.log.Info("socket gone (kubelet restart?): serving again", "socket", e.path())
			e.stop()
			if err := e.serve(); err != nil {
				e.log.Error("serve again; retrying", "err", err)
				continue
			}
		}
		if kubelet == (fileID{}) || e.kubelet == kubelet {
			continue
		}
		err := e.register(ctx, kubeletSock)
		switch {
		case err == nil:
			e.kubelet = kubelet
			e.log.Info("registered with the kubelet", "kubelet", kubeletSock, "endpoint", e.name)
		case ctx.Err() != nil:
			return
		case err.Error() != e.lastErr:
			e.log.Warn("registration failed; retrying", "err", err)
		}
		e.lastErr = errText(err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
