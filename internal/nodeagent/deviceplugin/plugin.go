// Package deviceplugin advertises a node's CPU pools to the kubelet as extended resources,
// through the device plugin API v1beta1
// (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).
//
// Each exclusive and shared pool is one resource <domain>/<pool> (domain: the pool config's
// resourceBaseName, else Options.Domain: podfence.io by default, or nokia.k8s.io for
// CPU-Pooler workloads), served by its own gRPC server on a unix socket
// podfence-<pool>.sock in the kubelet's device-plugin dir and registered with the kubelet at
// <dir>/kubelet.sock. The default pool is not advertised, nor a pool with requestAPI: dra
// (pools.Pool.ViaDRA: the DRA driver podfence-dra publishes it; one CPU is never offered twice).
//
//   - Exclusive pool: one device per request unit (pools.Pool.Devices), ID = CPU ID ("12"),
//     with the CPU's NUMA node as TopologyInfo. A pool that lists physical cores (CPU-Pooler's
//     meaning) has one device per listed CPU: under singleThreaded the container gets that
//     CPU and the agent keeps its siblings idle, under multiThreaded it gets the whole core.
//     A pool that lists threads has one device per CPU (multiThreaded) or per core, its
//     lowest thread (singleThreaded). So the kubelet's count matches what the pool can hold.
//     GetPreferredAllocation answers with the allocator's choice (package allocate: whole
//     cores, one NUMA node, packed). Allocate returns the container's CPUs in
//     EXCLUSIVE_CPUS=12,13,52,53 and in the container annotations podfence.io/exclusive-cpus
//     and podfence.io/exclusive-cpus.<pool> ("12-13,52-53"), which the NRI agent takes as the
//     container's exact CPUs.
//   - Shared pool: one device per millicpu, IDs <pool>-0 … <pool>-<1000·CPUs-1>, with the
//     pool's NUMA node as TopologyInfo when it has one (none when it spans several). Allocate
//     returns SHARED_CPUS, the pool's CPUs.
//
// Health: a device is Unhealthy while its CPU is offline (the shared pool keeps 1000 healthy
// devices per online CPU); see Options.Online and Plugin.SetOnline.
//
// Run re-serves and re-registers when the kubelet restarts: it checks the dir every
// PollInterval for a re-created kubelet.sock or a removed own socket (the kubelet clears
// the dir when it starts). Reload takes a new pool layout: changed pools send their new
// devices through ListAndWatch, new pools are served and registered, removed pools stop.
package deviceplugin

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// KubeletSocket is the kubelet's registration socket in the device-plugin dir.
const KubeletSocket = "kubelet.sock"

// maxSocketPath is the longest unix socket path Linux takes (sun_path less its NUL).
const maxSocketPath = 107

// Options configure the device plugin. The zero value is the kubelet's defaults.
type Options struct {
	// Dir is the kubelet's device-plugin dir (pluginapi.DevicePluginPath if empty).
	Dir string
	// Domain names the resources <Domain>/<pool> of a pool config without resourceBaseName:
	// pools.DefaultDomain (if empty), pools.CPUPoolerDomain or another domain name. One domain
	// only: two resources over the same CPUs would let the kubelet hand a CPU out twice.
	Domain string
	// Online, if set, is read every PollInterval: devices of CPUs not in it are Unhealthy.
	Online func() (cpuset.CPUSet, error)
	// PollInterval is how often Run checks the kubelet socket and Online (1s if 0).
	PollInterval time.Duration
}

// Plugin serves a node's pools to the kubelet. Create it with New; call Run once.
type Plugin struct {
	opts     Options
	log      *slog.Logger
	reloaded chan struct{} // tells Run that res changed; capacity 1

	mu     sync.Mutex
	res    []*resource   // sorted by name
	online cpuset.CPUSet // online CPUs (the topology's until SetOnline)
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
	if bad := validation.IsDNS1123Subdomain(opts.Domain); len(bad) > 0 {
		return nil, fmt.Errorf("device plugin resource domain %q: want a domain name such as %s or %s: %s", opts.Domain,
			pools.DefaultDomain, pools.CPUPoolerDomain, strings.Join(bad, "; "))
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	p := &Plugin{opts: opts, log: log, reloaded: make(chan struct{}, 1), online: node.Topology.Online()}
	if p.res, err = p.resources(node); err != nil {
		return nil, err
	}
	return p, nil
}

// resources builds node's resources, reusing the current ones whose devices are the same.
// The caller holds p.mu (or owns p).
func (p *Plugin) resources(node *plan.Node) ([]*resource, error) {
	out := newResources(node, p.opts.Domain, p.online)
	for i, r := range out {
		if path := filepath.Join(p.opts.Dir, socketName(r)); len(path) > maxSocketPath {
			return nil, fmt.Errorf("socket path %s of %s is %d bytes, over the unix socket limit of %d: use a shorter device plugin dir",
				path, r.name, len(path), maxSocketPath)
		}
		for _, old := range p.res {
			if old.same(r) {
				out[i] = old
			}
		}
	}
	return out, nil
}

// Reload advertises the pools of node instead of the current ones (after a pool config
// change the agent took). It fails only when a new pool's socket path is too long.
func (p *Plugin) Reload(node *plan.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, err := p.resources(node)
	if err != nil {
		return fmt.Errorf("reload device plugins: %w", err)
	}
	p.res = res
	select {
	case p.reloaded <- struct{}{}:
	default:
	}
	return nil
}

// current returns the resources to advertise.
func (p *Plugin) current() []*resource {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// Resources returns the advertised resource names, sorted.
func (p *Plugin) Resources() []string {
	var names []string
	for _, r := range p.current() {
		names = append(names, r.name)
	}
	return names
}

// SetOnline marks the devices of CPUs not in online Unhealthy (and the others Healthy) and
// sends the change to the kubelet's ListAndWatch streams. Safe to call at any time.
func (p *Plugin) SetOnline(online cpuset.CPUSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.online = online
	for _, r := range p.res {
		if r.setOnline(online) {
			p.log.Info("device health changed", "resource", r.name,
				"onlineCPUs", online.Intersection(r.pool.CPUs).String(), "offlineCPUs", r.pool.CPUs.Difference(online).String())
		}
	}
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
