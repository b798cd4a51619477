// Package plan is podfence's pure planner: from a node (topology, validated pools, policy),
// what the node already handed out (Ledger) and one container's request, it computes a
// Decision — pool, cpuset, memory nodes, CFS quota, environment — or a Refusal with a reason.
// It performs no I/O; the NRI agent and `podfence plan` apply or print its decisions.
package plan

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocate"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// DefaultCFSPeriod is the CFS period, in microseconds, used for shared-pool quotas.
const DefaultCFSPeriod = 100000

// MinCFSQuota is the smallest CFS quota the kernel accepts, in microseconds. A share whose
// quota would be smaller gets this one, as the kubelet does for small CPU limits (1 ms per
// 100 ms period: 10 millicpu).
const MinCFSQuota = 1000

// CFSQuotas says which containers get a CFS quota (CPU-Pooler's --cfs-quotas, plus
// podfence's former rule).
type CFSQuotas string

const (
	// QuotasAll is CPU-Pooler's default: a shared container gets its share; an exclusive one
	// its exclusive units plus 100 millicpu, so that it is not throttled by accident; a
	// container with both its exclusive units plus the whole shared pool, so that bursts of
	// its shared threads do not throttle its exclusive ones.
	QuotasAll CFSQuotas = "all"
	// QuotasShared is CPU-Pooler's "shared": no quota for an exclusive-only container; a
	// container with exclusive CPUs and a share is held to its share, as CPU-Pooler does.
	QuotasShared CFSQuotas = "shared"
	// QuotasSum is podfence's former rule: no quota for an exclusive-only container; a
	// container with a share gets its exclusive CPUs plus its share.
	QuotasSum CFSQuotas = "sum"
)

// CFSQuotaModes lists the values of CFSQuotas, the default first.
func CFSQuotaModes() []CFSQuotas { return []CFSQuotas{QuotasAll, QuotasShared, QuotasSum} }

// Set parses a flag value (pflag.Value).
func (q *CFSQuotas) Set(v string) error {
	for _, m := range CFSQuotaModes() {
		if string(m) == v {
			*q = m
			return nil
		}
	}
	return fmt.Errorf("%q: want all (CPU-Pooler's default), shared or sum", v)
}

func (q CFSQuotas) String() string {
	if q == "" {
		return string(QuotasAll)
	}
	return string(q)
}

// Type names the flag's value type (pflag.Value).
func (q *CFSQuotas) Type() string { return "all|shared|sum" }

// Policy holds node-wide planning settings.
type Policy struct {
	// CFSPeriod is the CFS period in microseconds for quotas (DefaultCFSPeriod if 0).
	CFSPeriod int64
	// CFSQuotas says which containers get a quota (QuotasAll if empty).
	CFSQuotas CFSQuotas
}

// Node is the static part of planning: what the node is and how it is split. Read-only.
type Node struct {
	Topology *topology.Topology
	Pools    *pools.Node
	Policy   Policy
	index    map[string]*allocate.Index // exclusive pool name → layout
	isolated map[string]isolatedChoice  // exclusive pool name → its isolatedCPUs, when set
}

// isolatedChoice is how an exclusive pool takes the CPUs the host isolated: eligible are the
// pool CPUs that may go to a container (allocate.Index.Eligible), only says require.
type isolatedChoice struct {
	eligible allocate.Set
	only     bool
}

// NewNode indexes the exclusive pools of a validated pool layout.
func NewNode(topo *topology.Topology, pn *pools.Node, pol Policy) *Node {
	if pol.CFSPeriod <= 0 {
		pol.CFSPeriod = DefaultCFSPeriod
	}
	if pol.CFSQuotas == "" {
		pol.CFSQuotas = QuotasAll
	}
	n := &Node{Topology: topo, Pools: pn, Policy: pol, index: map[string]*allocate.Index{}, isolated: map[string]isolatedChoice{}}
	for _, p := range pn.Pools {
		if p.Type == allocation.TypeExclusive {
			ix := allocate.NewIndex(topo, p.CPUs, UnitOf(p), p.Devices)
			n.index[p.Name] = ix
			if choice := p.Isolation.IsolatedCPUs; choice != "" {
				n.isolated[p.Name] = isolatedChoice{eligible: ix.Eligible(allocate.SetOf(p.HostIsolated)),
					only: choice == pools.RequireIsolated}
			}
		}
	}
	return n
}

// IsolatedCPUs returns, for exclusive pool pool when it sets isolatedCPUs (ok), the pool CPUs
// a container may be given of those the host isolated (allocate.Index.Eligible): taken first,
// or alone when only (require).
func (n *Node) IsolatedCPUs(pool string) (eligible cpuset.CPUSet, only, ok bool) {
	c, ok := n.isolated[pool]
	if !ok {
		return cpuset.New(), false, false
	}
	return c.eligible.CPUSet(), c.only, true
}

// Warnings are the node's problems for the operator: the host's isolation (odd kernel
// command line) and the pool layout's.
func (n *Node) Warnings() []string {
	return append(slices.Clone(n.Topology.Isolation.Warnings), n.Pools.Warnings...)
}

// UnitOf is what one requested CPU of exclusive pool p is.
func UnitOf(p pools.Pool) allocate.Unit {
	switch {
	case p.HTPolicy == pools.SingleThreaded:
		return allocate.CoreOneThread
	case p.WholeCores:
		return allocate.WholeCore
	}
	return allocate.Thread
}

// Units returns how many request units of exclusive pool pool cpus are: their physical cores
// when a unit is a core (a CPU that is not online counts as a core of its own), else their
// CPUs; 0 for a pool that is not exclusive. The CPUs need not be the pool's.
func (n *Node) Units(pool string, cpus cpuset.CPUSet) int {
	ix, ok := n.index[pool]
	switch {
	case !ok:
		return 0
	case ix.Unit() == allocate.Thread:
		return cpus.Size()
	}
	cores := map[int]bool{}
	for _, id := range cpus.UnsortedList() {
		core := -1 - id // offline: its own
		if c, ok := n.Topology.CPUs[id]; ok {
			core = c.Core
		}
		cores[core] = true
	}
	return len(cores)
}

// poolNames lists the node's pools of one type (all pools if typ is "").
func (n *Node) poolNames(typ allocation.PoolType) []string {
	var names []string
	for _, p := range n.Pools.Pools {
		if typ == "" || p.Type == typ {
			names = append(names, p.Name)
		}
	}
	return names
}

// Refusal is a container the node will not run as asked, with the reason. Code is stable for
// programs; Reason is for people.
type Refusal struct {
	Pod       string `json:"pod"` // namespace/name
	Container string `json:"container"`
	Code      string `json:"code"`
	Reason    string `json:"reason"`
}

// Refusal codes.
const (
	CodeUnknownPool         = "UnknownPool"
	CodeNotEnoughCPUs       = "NotEnoughCPUs"
	CodeFractionalExclusive = "FractionalExclusive"
	CodeSharedTooLarge      = "SharedTooLarge"
	CodeExclusiveTooLarge   = "ExclusiveTooLarge"
	CodeNotEnoughShared     = "NotEnoughShared"
	CodeInvalidRequest      = "InvalidRequest"
	CodeCPUsUnavailable     = "CPUsUnavailable"
	// CodeNotEnoughIsolatedCPUs: a pool with isolatedCPUs: require lacks free CPUs the host isolated.
	CodeNotEnoughIsolatedCPUs = "NotEnoughIsolatedCPUs"
	// CodeCPUsNotIsolated: given CPUs of a pool with isolatedCPUs: require are not all isolated.
	CodeCPUsNotIsolated = "CPUsNotIsolated"
	CodeProcessPinning  = "ProcessPinning" // the pinning annotation's processes do not fit the container's CPUs
)

func (r *Refusal) Error() string {
	return fmt.Sprintf("pod %s container %q refused (%s): %s", r.Pod, r.Container, r.Code, r.Reason)
}

// PoolCPUs maps each pool name to its CPUs (the default pool with its unpooled CPUs), as
// checkpoint.Validate takes them.
func (n *Node) PoolCPUs() map[string]cpuset.CPUSet {
	out := map[string]cpuset.CPUSet{}
	for _, p := range n.Pools.Pools {
		out[p.Name] = p.CPUs
	}
	out[n.Pools.Default.Name] = n.Pools.Default.CPUs
	return out
}
