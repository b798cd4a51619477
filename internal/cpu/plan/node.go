// Package plan is podfence's pure planner: from a node (topology, validated pools, policy),
// what the node already handed out (Ledger) and one container's request, it computes a
// Decision — pool, cpuset, memory nodes, CFS quota, environment — or a Refusal with a reason.
// It performs no I/O; the NRI agent and `podfence plan` apply or print its decisions.
package plan

import (
	"fmt"

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

// Policy holds node-wide planning settings.
type Policy struct {
	// CFSPeriod is the CFS period in microseconds for shared-pool quotas (DefaultCFSPeriod if 0).
	CFSPeriod int64
}

// Node is the static part of planning: what the node is and how it is split. Read-only.
type Node struct {
	Topology *topology.Topology
	Pools    *pools.Node
	Policy   Policy
	index    map[string]*allocate.Index // exclusive pool name → layout
}

// NewNode indexes the exclusive pools of a validated pool layout.
func NewNode(topo *topology.Topology, pn *pools.Node, pol Policy) *Node {
	if pol.CFSPeriod <= 0 {
		pol.CFSPeriod = DefaultCFSPeriod
	}
	n := &Node{Topology: topo, Pools: pn, Policy: pol, index: map[string]*allocate.Index{}}
	for _, p := range pn.Pools {
		if p.Type == allocation.TypeExclusive {
			n.index[p.Name] = allocate.NewIndex(topo, p.CPUs, p.HTPolicy == pools.SingleThreaded)
		}
	}
	return n
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
