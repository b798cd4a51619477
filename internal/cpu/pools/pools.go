// Package pools reads CPU-Pooler compatible pool configs and resolves them against a node.
//
// A pool config is one YAML document, usually a ConfigMap entry named poolconfig-<name>.yaml
// (see https://github.com/nokia/CPU-Pooler):
//
//	resourceBaseName: nokia.k8s.io
//	pools:
//	  exclusive_caas: {cpus: "2-5", hyperThreadingPolicy: singleThreaded}
//	  shared_caas:    {cpus: "6-7"}
//	  default:        {cpus: "0-1"}
//	nodeSelector: {nodeType: caas}
//
// A pool's type comes from its name, as in CPU-Pooler: names that start with "exclusive" are
// exclusive pools (whole CPUs per container), names that start with "shared" are the shared
// pool (millicpu slices of one cpuset), and any other name is the default pool (pod
// sandboxes and containers that ask for no pool). A node has at most one shared and one
// default pool, and a CPU is listed by at most one pool. cpus is a Linux CPU list (cpuset(7)).
//
// The fields mean what they mean in CPU-Pooler unless the config says otherwise:
//   - an exclusive pool's cpus lists physical cores (ExclusiveCPUs Cores): each listed CPU
//     stands for its core, whose SMT siblings the pool owns too; singleThreaded gives a
//     container the listed CPU and keeps the siblings idle, multiThreaded gives the whole
//     core. Shared and default pools own the CPUs they list. exclusiveCPUs: threads makes an
//     exclusive pool own exactly the threads it lists (multiThreaded then counts threads);
//   - online CPUs that no pool owns stay unused by containers (UnpooledCPUs Unused), unless
//     unpooledCPUs: default gives them to the default pool, or the config declares no
//     default pool (then they are the default pool);
//   - a nodeSelector matches a node when any one of its labels does, and the first matching
//     config in file name order is the node's (SelectorMatch AnyLabel); nodeSelectorMatch:
//     all asks for every label, and for exactly one matching config;
//   - resourceBaseName is the domain the config's pools are advertised under.
//
// Parse and Load read configs, Select picks the one for a node, and Resolve checks it against
// the node's topology and works out what each pool owns. The package is pure: it reads files
// only in Load (and Loader.Load) and never logs.
package pools

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Name prefixes that select a pool type, as CPU-Pooler's DeterminePoolType matches them.
const (
	exclusivePrefix = "exclusive"
	sharedPrefix    = "shared"
)

// TypeOf returns the type of the pool named poolName: exclusive for names that start with
// "exclusive", shared for names that start with "shared", default for any other name.
func TypeOf(poolName string) allocation.PoolType {
	switch {
	case strings.HasPrefix(poolName, sharedPrefix):
		return allocation.TypeShared
	case strings.HasPrefix(poolName, exclusivePrefix):
		return allocation.TypeExclusive
	}
	return allocation.TypeDefault
}

// HTPolicy says how an exclusive pool hands out SMT threads.
type HTPolicy string

const (
	// SingleThreaded gives a container one thread per physical core and keeps the core's
	// other threads in the pool idle. It is the value used when a pool sets no policy, as in
	// CPU-Pooler, so its configs keep their meaning.
	SingleThreaded HTPolicy = "singleThreaded"
	// MultiThreaded gives a container every thread of the cores it gets, whole cores first.
	MultiThreaded HTPolicy = "multiThreaded"
)

// ExclusiveCPUs says what an exclusive pool's cpus list.
type ExclusiveCPUs string

const (
	// Cores is CPU-Pooler's meaning and the default: every listed CPU stands for its
	// physical core, and the pool owns the core's online SMT siblings too (those no other
	// pool lists). One request unit is one core.
	Cores ExclusiveCPUs = "cores"
	// Threads: the pool owns the threads it lists and no others.
	Threads ExclusiveCPUs = "threads"
)

// UnpooledCPUs says what becomes of online CPUs that no pool owns.
type UnpooledCPUs string

const (
	// Unused is CPU-Pooler's meaning and the default: no container runs on them (the host's
	// own processes do). When the config declares no default-type pool they are the default pool.
	Unused UnpooledCPUs = "unused"
	// JoinDefault adds them to the default pool.
	JoinDefault UnpooledCPUs = "default"
)

// SelectorMatch says when a config's nodeSelector matches a node.
type SelectorMatch string

const (
	// AnyLabel is CPU-Pooler's rule and the default: one selector label on the node with the
	// same value is enough, and the first such config (in file name order) wins.
	AnyLabel SelectorMatch = "any"
	// AllLabels is Kubernetes' rule: every selector label must match, and no other AllLabels
	// config may match too.
	AllLabels SelectorMatch = "all"
)

// RequestAPI says how pods request a pool's CPUs.
type RequestAPI string

const (
	// DevicePlugin is the default: the pool is an extended resource the agent's device
	// plugin advertises (<domain>/<pool>), requested in a container's resources.
	DevicePlugin RequestAPI = "devicePlugin"
	// DRA: the pool is published by the DRA driver (podfence-dra) as devices in
	// ResourceSlices and requested with ResourceClaims; the device plugin leaves it out, so
	// one CPU is never offered through both.
	DRA RequestAPI = "dra"
)

// Pool is one named CPU pool.
type Pool struct {
	Name     string
	Type     allocation.PoolType // TypeOf(Name)
	CPUs     cpuset.CPUSet       // in a Config: as listed, never empty; in a Node: the online CPUs the pool owns
	HTPolicy HTPolicy            // SingleThreaded when the config sets none
	API      RequestAPI          // DevicePlugin when the config sets none ("" means it too)

	// Devices and WholeCores are set by Resolve, for exclusive pools. Devices holds one CPU
	// per request unit, the CPU the unit is known by (a device of the pool's extended
	// resource): a physical core's listed CPU under Cores, its lowest thread under Threads
	// with singleThreaded, and every CPU under Threads with multiThreaded. Under
	// singleThreaded a container gets its units' Devices CPUs and the cores' other threads
	// stay idle for it.
	Devices cpuset.CPUSet
	// WholeCores is true when one unit is a whole core that a container gets with all its
	// threads (multiThreaded under Cores, CPU-Pooler's meaning).
	WholeCores bool
	// Isolation is what an exclusive pool keeps off its containers' CPUs beyond the cpuset.
	Isolation Isolation
	// HostIsolated, set by Resolve for exclusive pools, are the pool's CPUs the host isolated
	// at boot (topology.HostIsolation.Isolated): those isolatedCPUs prefers or requires.
	HostIsolated cpuset.CPUSet
}

// ViaDRA says whether pods request the pool through DRA (requestAPI: dra).
func (p Pool) ViaDRA() bool { return p.API == DRA }

// Config is one parsed pool config file.
type Config struct {
	Source       string            // file path or other origin, used in errors
	NodeSelector map[string]string // empty: see Select
	Pools        []Pool            // sorted by name

	// ResourceBaseName is the domain the pools are advertised under ("" when the config sets
	// none: the agent's --resource-domain).
	ResourceBaseName string
	// ExclusiveCPUs, UnpooledCPUs and SelectorMatch are the config's choices (Parse sets
	// the defaults Cores, Unused and AnyLabel when the file leaves them out).
	ExclusiveCPUs ExclusiveCPUs
	UnpooledCPUs  UnpooledCPUs
	SelectorMatch SelectorMatch
	// Warnings are problems in the file that do not make it invalid.
	Warnings []string
}

// Node is a config resolved against one node's topology. Every online CPU is in at most one
// of Pools (in none when it is unused); Default is also in Pools.
type Node struct {
	Source string
	// Config is what the node was resolved from (to resolve it again when CPUs go offline
	// or come back).
	Config *Config
	// Offline lists, by pool name, the pool's CPUs that are offline: they are left out of
	// the pool's CPUs until they are online again (the pool is degraded).
	Offline map[string]cpuset.CPUSet
	Pools   []Pool // every pool incl. the default one, sorted by name
	Default Pool   // the default-type pool, with Unpooled CPUs when they join it; named "default" if the config declares none
	// Unpooled are the online CPUs no pool owns. They are in Default when they join it
	// (JoinDefault, or no default pool declared), else in no pool: Unused.
	Unpooled cpuset.CPUSet
	Unused   cpuset.CPUSet // online CPUs in no pool: no container runs on them
	Warnings []string      // problems that do not stop the agent, for the operator
}

// DefaultPoolName names the default pool when a config declares none.
const DefaultPoolName = "default"

// Pool returns the pool called name.
func (n *Node) Pool(name string) (Pool, bool) {
	for _, p := range n.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}

// Shared returns the shared pool, if the node has one.
func (n *Node) Shared() (Pool, bool) {
	for _, p := range n.Pools {
		if p.Type == allocation.TypeShared {
			return p, true
		}
	}
	return Pool{}, false
}

// PoolOf returns the pool that holds cpu; false when cpu is not online or unused.
func (n *Node) PoolOf(cpu int) (Pool, bool) {
	for _, p := range n.Pools {
		if p.CPUs.Contains(cpu) {
			return p, true
		}
	}
	return Pool{}, false
}

// Resource name domains: pools are advertised as <domain>/<pool>.
const (
	DefaultDomain   = "podfence.io"
	CPUPoolerDomain = "nokia.k8s.io"
)

// Domains returns the resource name domains podfence accepts: DefaultDomain,
// CPUPoolerDomain and the ResourceBaseName of each of configs, without repeats.
func Domains(configs ...*Config) []string {
	out := []string{DefaultDomain, CPUPoolerDomain}
	for _, c := range configs {
		if d := c.ResourceBaseName; d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// ResourceName returns the extended resource name podfence advertises for pool.
func ResourceName(pool string) string { return DefaultDomain + "/" + pool }

// ParseResourceName returns the pool named by an extended resource name "<domain>/<pool>"
// whose domain is one of Domains(), such as "nokia.k8s.io/exclusive_caas".
func ParseResourceName(name string) (pool string, ok bool) {
	return ParseResourceNameIn(name, Domains())
}

// ParseResourceNameIn is ParseResourceName for the given domains (see Domains).
func ParseResourceNameIn(name string, domains []string) (pool string, ok bool) {
	domain, pool, found := strings.Cut(name, "/")
	if !found || checkName(pool) != "" || !slices.Contains(domains, domain) {
		return "", false
	}
	return pool, true
}

// maxNameLen is the longest name part of a Kubernetes qualified (extended resource) name.
const maxNameLen = 63

// checkName says what is wrong with a pool name, or returns "" when it can be the name part
// of an extended resource name: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 bytes.
func checkName(name string) string {
	const want = "want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters, so that " +
		DefaultDomain + "/<pool> is a valid extended resource name"
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	switch {
	case name == "":
		return "is empty (" + want + ")"
	case len(name) > maxNameLen:
		return fmt.Sprintf("is %d characters long (%s)", len(name), want)
	case !alnum(name[0]) || !alnum(name[len(name)-1]):
		return "must start and end with a letter or digit (" + want + ")"
	}
	for _, r := range name {
		if r > 0x7f || !alnum(byte(r)) && r != '-' && r != '_' && r != '.' {
			return fmt.Sprintf("has the character %q (%s)", r, want)
		}
	}
	return ""
}
