package plan

import (
	"errors"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/dra/grant"
)

// Placed is one planned container of a pod.
type Placed struct {
	Pod       string `json:"pod"` // namespace/name
	Container string `json:"container"`
	// Init is a plain init container: it ends before the next container starts, which may
	// reuse what it held. Sidecar is an init container with restartPolicy Always (a native
	// sidecar): it runs for the pod's whole life and holds its CPUs all along.
	Init     bool     `json:"init,omitempty"`
	Sidecar  bool     `json:"sidecar,omitempty"`
	Decision Decision `json:"decision"`
}

// PoolUsage is how much of one pool the plan uses.
type PoolUsage struct {
	Pool       string              `json:"pool"`
	Type       allocation.PoolType `json:"type"`
	CPUs       string              `json:"cpus"`
	Size       int                 `json:"size"`               // CPUs in the pool
	Held       int                 `json:"held,omitempty"`     // exclusive: CPUs held (given + idled)
	Idled      int                 `json:"idled,omitempty"`    // exclusive: siblings idled by singleThreaded
	MilliCPU   int64               `json:"milliCPU,omitempty"` // shared: millicpu granted
	Capacity   int64               `json:"capacity,omitempty"` // shared: millicpu in the pool
	Containers int                 `json:"containers"`         // containers running on the pool
}

// Report is the outcome of planning a list of pods on a node.
type Report struct {
	Placed   []Placed    `json:"containers"`
	Refusals []Refusal   `json:"refusals,omitempty"`
	Usage    []PoolUsage `json:"pools"`
	Warnings []string    `json:"warnings,omitempty"`
}

// PlanPods plans pods in order, as a node admitting them one after another would. Init
// containers are planned first, in order. A plain one is released when done: it exits before
// the next container starts, and the kubelet's CPU and device managers give what it held to
// the containers that follow. A sidecar (restartPolicy Always) is never released: it runs
// beside the containers that follow it. grants are what the DRA driver prepared on the node
// (a grant store's List): a container gets what the grants of its claims give
// (withPodClaims). A pod with any refused container is refused whole: what its other
// containers took is released, so later pods see the node as if it never came.
func (n *Node) PlanPods(s *Ledger, pods []*corev1.Pod, grants ...grant.Grant) Report {
	var rep Report
	rep.Warnings = append(rep.Warnings, n.Warnings()...)
	byName := map[string]grant.Grant{}
	for _, g := range grants {
		if _, dup := byName[g.Namespace+"/"+g.Name]; !dup {
			byName[g.Namespace+"/"+g.Name] = g
		}
	}
	for _, pod := range pods {
		placed, refusal := n.planPod(s, pod, byName)
		if refusal != nil {
			rep.Refusals = append(rep.Refusals, *refusal)
			continue
		}
		rep.Placed = append(rep.Placed, placed...)
	}
	rep.Usage = n.Usage(s, rep.Placed)
	return rep
}

func (n *Node) planPod(s *Ledger, pod *corev1.Pod, grants map[string]grant.Grant) ([]Placed, *Refusal) {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	uid := string(pod.UID)
	if uid == "" {
		uid = ns + "/" + pod.Name
	}
	name := ns + "/" + pod.Name
	var configs []*pools.Config
	if n.Pools.Config != nil {
		configs = append(configs, n.Pools.Config)
	}
	reqs, err := ContainerRequestsIn(pod, pools.Domains(configs...))
	if err != nil {
		return nil, &Refusal{Pod: name, Code: CodeInvalidRequest, Reason: err.Error()}
	}
	var placed []Placed
	var taken []allocation.Key
	place := func(c corev1.Container, init, sidecar bool) *Refusal {
		ctr := Container{PodUID: uid, Namespace: ns, Pod: pod.Name, Name: c.Name, Request: reqs[c.Name]}
		var err error
		if ctr.Processes, ctr.Pinned, err = PinningOf(c.Name, pod.Annotations); err != nil {
			return refusalOf(name, c.Name, err)
		}
		if ctr, err = n.withPodClaims(ctr, pod, c, grants); err != nil {
			return refusalOf(name, c.Name, err)
		}
		d, err := n.Allocate(s, ctr)
		if err != nil {
			return refusalOf(name, c.Name, err)
		}
		placed = append(placed, Placed{Pod: name, Container: c.Name, Init: init, Sidecar: sidecar, Decision: d})
		taken = append(taken, d.Allocation.Key())
		return nil
	}
	refused := func(r *Refusal) ([]Placed, *Refusal) {
		for _, k := range taken {
			s.Release(k)
		}
		return nil, r
	}
	for _, c := range pod.Spec.InitContainers {
		sidecar := IsSidecar(c)
		if r := place(c, !sidecar, sidecar); r != nil {
			return refused(r)
		}
		if !sidecar {
			s.Release(taken[len(taken)-1])
			taken = taken[:len(taken)-1]
		}
	}
	for _, c := range pod.Spec.Containers {
		if r := place(c, false, false); r != nil {
			return refused(r)
		}
	}
	return placed, nil
}

// refusalOf is err as the refusal of container ctr of pod: a planner's refusal as it is, a
// DRA claim's with CodeDRAClaim, any other with CodeInvalidRequest.
func refusalOf(pod, ctr string, err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	code := CodeInvalidRequest
	var ce *ClaimError
	if errors.As(err, &ce) {
		code = CodeDRAClaim
	}
	return &Refusal{Pod: pod, Container: ctr, Code: code, Reason: err.Error()}
}

// IsSidecar says whether init container c is a native sidecar: restartPolicy Always.
func IsSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// Usage summarises each pool: CPUs held, millicpu granted, containers placed.
func (n *Node) Usage(s *Ledger, placed []Placed) []PoolUsage {
	count := map[string]int{}
	for _, p := range placed {
		if p.Init {
			continue
		}
		a := p.Decision.Allocation
		count[a.Pool]++
		for _, extra := range a.ExtraPools {
			count[extra]++
		}
		if a.SharedPool != "" && a.SharedPool != a.Pool {
			count[a.SharedPool]++
		}
	}
	var out []PoolUsage
	for _, p := range n.Pools.Pools {
		if p.Type == allocation.TypeDefault {
			p = n.Pools.Default
		}
		u := PoolUsage{Pool: p.Name, Type: p.Type, CPUs: p.CPUs.String(), Size: p.CPUs.Size(), Containers: count[p.Name]}
		switch p.Type {
		case allocation.TypeExclusive:
			held := cpuset.New()
			for _, a := range s.Allocations() {
				if slices.Contains(a.ExclusivePools(), p.Name) {
					held = held.Union(a.Held().Intersection(p.CPUs))
					u.Idled += a.Idled.Intersection(p.CPUs).Size()
				}
			}
			u.Held = held.Size()
		case allocation.TypeShared:
			u.MilliCPU, u.Capacity = s.SharedUsed(), int64(p.CPUs.Size())*1000
		}
		out = append(out, u)
	}
	sort.SliceStable(out, func(i, j int) bool { return allocation.TypeRank(out[i].Type) < allocation.TypeRank(out[j].Type) })
	return out
}
