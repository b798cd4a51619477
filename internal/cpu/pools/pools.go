// Package pools reads CPU-Pooler compatible pool configs and resolves them against a node.
//
// A pool config is one YAML document, usually a ConfigMap entry named poolconfig-<name>.yaml
// (see https://github.com/nokia/CPU-Pooler):
//
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
// default pool, and a CPU belongs to at most one pool. cpus is a Linux CPU list (cpuset(7)).
//
// Parse and Load read configs, Select picks the one whose nodeSelector matches a node, and
// Resolve checks it against the node's topology and puts the CPUs no pool names into the
// default pool. The package is pure: it reads files only in Load (and Loader.Load) and never
// logs.
package pools

import (
	"fmt"
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

// Pool is one named CPU pool.
type Pool struct {
	Name     string
	Type     allocation.PoolType // TypeOf(Name)
	CPUs     cpuset.CPUSet       // never empty in a valid config
	HTPolicy HTPolicy            // SingleThreaded when the config sets none
}

// Config is one parsed pool config file.
type Config struct {
	Source       string            // file path or other origin, used in errors
	NodeSelector map[string]string // empty selects every node
	Pools        []Pool            // sorted by name
}

// Node is a config resolved against one node's topology. Every online CPU is in exactly
// one of Pools; Default is also in Pools.
type Node struct {
	Source string
	// Config is what the node was resolved from (to resolve it again when CPUs go offline
	// or come back).
	Config *Config
	// Offline lists, by pool name, the pool's CPUs that are offline: they are left out of
	// the pool's CPUs until they are online again (the pool is degraded).
	Offline  map[string]cpuset.CPUSet
	Pools    []Pool        // every pool incl. the default one, sorted by name
	Default  Pool          // the default-type pool, with Unpooled CPUs added; named "default" if the config declares none
	Unpooled cpuset.CPUSet // online CPUs no pool names (they joined Default)
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

// PoolOf returns the pool that holds cpu; false when cpu is not online.
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

// Domains returns the resource name domains podfence accepts, DefaultDomain first.
func Domains() []string { return []string{DefaultDomain, CPUPoolerDomain} }

// ResourceName returns the extended resource name podfence advertises for pool.
func ResourceName(pool string) string { return DefaultDomain + "/" + pool }

// ParseResourceName returns the pool named by an extended resource name "<domain>/<pool>"
// whose domain is one of Domains(), such as "nokia.k8s.io/exclusive_caas".
func ParseResourceName(name string) (pool string, ok bool) {
	domain, pool, found := strings.Cut(name, "/")
	if !found || checkName(pool) != "" {
		return "", false
	}
	for _, d := range Domains() {
		if domain == d {
			return pool, true
		}
	}
	return "", false
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
