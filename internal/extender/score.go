// Package extender is podfence's kube-scheduler HTTP extender: it filters out nodes that
// cannot give a pod the core-scheduling group it explicitly asks for, and scores nodes by
// cookie density, so that pods land where core scheduling costs least.
//
// Core scheduling forces a sibling thread idle whenever the two threads of a physical core
// hold tasks of different groups (cookies); the more distinct groups per physical core a node
// runs, the more forced idle. Score is the pure scoring; Cache holds the node facts, kept up to
// date by informer event handlers; Handler serves the extender API
// (k8s.io/kube-scheduler/extender/v1).
package extender

import (
	"math"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// Score bounds: the extender API's 0..10, with Neutral for "no opinion".
const (
	MaxScore = extenderv1.MaxExtenderPriority
	Neutral  = MaxScore / 2
)

// Weights of Score for pods that share their group (they sum to MaxScore).
const (
	densityWeight = 6 // room left: 1 - groups per physical core after placement
	shareWeight   = 4 // the pod's group already runs on the node
)

// Pod is what scoring needs of the pod being scheduled.
type Pod struct {
	Group     coresched.Group
	Exclusive bool  // policy exclusive: the pod wants whole cores of its own
	MilliCPU  int64 // its CPU request, as the scheduler counts it (init containers and sidecars too)
}

// Facts is what scoring needs of a node.
type Facts struct {
	Known          bool // the agent published the node's core-scheduling support
	CoreSched      bool // core scheduling works there
	Cores          int  // physical cores; 0 when not published
	ThreadsPerCore int  // logical CPUs per physical core (at least 1)
	Groups         int  // distinct groups (with a cookie) of the pods on the node
	HasGroup       bool // the pod's own group is among them
	BusyCores      int  // cores taken: max(exclusive pods, CPU requests in whole cores)
}

// Score rates a node for a pod in 0..MaxScore, higher is better:
//
//   - Neutral when the pod has no cookie (policy none) or the node is unknown, has no core
//     scheduling or no published core count: no opinion.
//   - a pod that shares its group: with d = (Groups + (0 if HasGroup else 1)) / Cores, the
//     density of groups per physical core once the pod is there,
//     round(6 × (1 − min(d, 1)) + 4 × [HasGroup]).
//   - an exclusive pod: with free = Cores − BusyCores and need its request in whole cores
//     (at least 1), 0 when free < need, else round(10 × free / Cores).
//
// Score is monotone: non-increasing in Groups and BusyCores, non-decreasing in Cores, and
// HasGroup never lowers it.
func Score(p Pod, n Facts) int64 {
	if p.Group.None() || !n.Known || !n.CoreSched || n.Cores <= 0 {
		return Neutral
	}
	cores := float64(n.Cores)
	if p.Exclusive {
		free := n.Cores - n.BusyCores
		if free <= 0 || free < NeedCores(p.MilliCPU, n.ThreadsPerCore) {
			return 0
		}
		return int64(math.Round(float64(MaxScore) * float64(free) / cores))
	}
	groups, share := n.Groups+1, 0.0
	if n.HasGroup {
		groups, share = n.Groups, 1
	}
	d := min(float64(groups)/cores, 1)
	return int64(math.Round(densityWeight*(1-d) + shareWeight*share))
}

// NeedCores is a CPU request in whole physical cores of tpc threads, at least 1.
func NeedCores(milliCPU int64, tpc int) int {
	per := int64(max(tpc, 1)) * 1000
	return int(max((milliCPU+per-1)/per, 1))
}
