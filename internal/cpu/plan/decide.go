package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocate"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
)

// Environment variables that tell the application its CPUs.
const (
	EnvExclusiveCPUs = "EXCLUSIVE_CPUS"
	EnvSharedCPUs    = "SHARED_CPUS"
)

// Container is one container to plan.
type Container struct {
	PodUID    string
	Namespace string
	Pod       string
	Name      string
	// Sandbox marks the pod sandbox (pause) container: always the default pool.
	Sandbox bool
	Request Request
	// ExclusiveCPUs, when set, are exact CPUs chosen elsewhere (the device plugin): used as
	// given once checked to be free CPUs of the requested exclusive pool.
	ExclusiveCPUs cpuset.CPUSet
}

// Key is the container's state key.
func (c Container) Key() allocation.Key { return allocation.Key{PodUID: c.PodUID, Container: c.Name} }

func (c Container) podName() string { return c.Namespace + "/" + c.Pod }

// Plan decides for one container without changing s. A container that already holds an
// allocation gets the decision it had (Existing), so a running container's CPUs never move.
func (n *Node) Plan(s *Ledger, c Container) (Decision, error) {
	if a, ok := s.Get(c.Key()); ok {
		d := n.decide(a)
		d.Existing = true
		return d, nil
	}
	a, err := n.allocation(s, c)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Pod, r.Container = c.podName(), c.Name
		}
		return Decision{}, err
	}
	return n.decide(a), nil
}

// Allocate plans and, on success, records the allocation in s.
func (n *Node) Allocate(s *Ledger, c Container) (Decision, error) {
	d, err := n.Plan(s, c)
	if err != nil || d.Existing {
		return d, err
	}
	if err := s.Add(d.Allocation); err != nil {
		return Decision{}, fmt.Errorf("record allocation of %s: %w", c.Key(), err)
	}
	return d, nil
}

func refuse(code, format string, args ...any) error {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// allocation computes what c would hold.
func (n *Node) allocation(s *Ledger, c Container) (allocation.Allocation, error) {
	a := allocation.Allocation{PodUID: c.PodUID, Namespace: c.Namespace, Pod: c.Pod, Container: c.Name,
		Pool: n.Pools.Default.Name, Type: allocation.TypeDefault}
	if c.Sandbox {
		return a, nil
	}
	var excl int64
	for _, name := range c.Request.Pools() {
		q := c.Request[name]
		p, ok := n.Pools.Pool(name)
		if !ok {
			return a, refuse(CodeUnknownPool, "pool %q (resource %s) does not exist on this node; its pools are %v",
				name, pools.ResourceName(name), n.poolNames(""))
		}
		switch p.Type {
		case allocation.TypeExclusive:
			if a.Type == allocation.TypeExclusive {
				return a, refuse(CodeInvalidRequest, "asks for two exclusive pools (%q and %q): a container may use one", a.Pool, name)
			}
			if size := resource.NewQuantity(int64(p.CPUs.Size()), resource.DecimalSI); q.Cmp(*size) > 0 {
				return a, refuse(CodeExclusiveTooLarge, "asks %s=%s, but exclusive pool %q has %d CPUs",
					pools.ResourceName(name), q.String(), name, p.CPUs.Size())
			}
			if q.MilliValue()%1000 != 0 || q.Sign() <= 0 {
				return a, refuse(CodeFractionalExclusive,
					"exclusive pool %q counts whole CPUs: %s=%s is not a whole number above 0 (ask for 1, 2, ...)",
					name, pools.ResourceName(name), q.String())
			}
			a.Pool, a.Type, excl = name, allocation.TypeExclusive, q.Value()
		case allocation.TypeShared:
			if err := n.shareOf(s, &a, name, q); err != nil {
				return a, err
			}
		}
	}
	if a.MilliCPU > 0 && a.Type == allocation.TypeDefault {
		a.Pool, a.Type = a.SharedPool, allocation.TypeShared
	}
	if a.Type == allocation.TypeExclusive {
		return a, n.exclusive(s, &a, int(excl), c.ExclusiveCPUs)
	}
	return a, nil
}

// shareOf sets the shared-pool share; q counts millicpu (devices of the pool's resource).
// An amount above the pool's capacity is refused before any arithmetic on it, so a value
// that overflows int64 cannot wrap into a grant.
func (n *Node) shareOf(s *Ledger, a *allocation.Allocation, name string, q resource.Quantity) error {
	p, _ := n.Pools.Pool(name)
	capacity := int64(p.CPUs.Size()) * 1000
	if q.Cmp(*resource.NewQuantity(capacity, resource.DecimalSI)) > 0 {
		return refuse(CodeSharedTooLarge, "asks %s millicpu of shared pool %q, which has %d CPUs (%d millicpu)",
			q.String(), name, p.CPUs.Size(), capacity)
	}
	milli1000 := q.MilliValue()
	if milli1000%1000 != 0 || milli1000 <= 0 {
		return refuse(CodeInvalidRequest, "shared pool %q counts millicpu as a whole number: %s=%s is not one above 0 (ask 500 for half a CPU)",
			name, pools.ResourceName(name), strconv.FormatFloat(float64(milli1000)/1000, 'f', -1, 64))
	}
	milli := milli1000 / 1000
	if free := capacity - s.SharedUsed(); milli > free {
		return refuse(CodeNotEnoughShared, "asks %d millicpu of shared pool %q: requested=%d, free=%d of %d", milli, name, milli, free, capacity)
	}
	a.SharedPool, a.MilliCPU = name, milli
	return nil
}

// exclusive fills a's CPUs: the given ones after checks, else the allocator's choice.
func (n *Node) exclusive(s *Ledger, a *allocation.Allocation, want int, given cpuset.CPUSet) error {
	ix, free := n.index[a.Pool], s.free[a.Pool]
	if given.Size() == 0 {
		r, err := ix.Exclusive(free, want)
		var short *allocate.InsufficientError
		if errors.As(err, &short) {
			return refuse(CodeNotEnoughCPUs, "exclusive pool %q: %v", a.Pool, err)
		}
		if err != nil {
			return refuse(CodeInvalidRequest, "exclusive pool %q: %v", a.Pool, err)
		}
		a.CPUs, a.Idled = r.CPUs.CPUSet(), r.Idled.CPUSet()
		return nil
	}
	g := allocate.SetOf(given)
	switch {
	case given.Size() != want:
		return refuse(CodeInvalidRequest, "given CPUs %s are %d, but the container asks %d of pool %q", given, given.Size(), want, a.Pool)
	case !g.IsSubsetOf(ix.Pool()):
		return refuse(CodeCPUsUnavailable, "given CPUs %s are not all in exclusive pool %q (%s)", given, a.Pool, ix.Pool())
	case !g.IsSubsetOf(free):
		return refuse(CodeCPUsUnavailable, "given CPUs %s of pool %q are held by %s", g.Difference(free), a.Pool, s.holders(g.Difference(free)))
	}
	a.CPUs = given
	a.Idled = n.IdledSiblings(a.Pool, given)
	if held := allocate.SetOf(a.Idled).Difference(free); held.Size() > 0 {
		return refuse(CodeCPUsUnavailable, "given CPUs %s of singleThreaded pool %q share cores with CPUs %s held by %s: "+
			"a singleThreaded container has its cores to itself", given, a.Pool, held, s.holders(held))
	}
	return nil
}

// IdledSiblings is what an exclusive allocation of cpus in pool keeps idle beside them: in a
// singleThreaded pool, the pool's other threads of their cores; nothing in a multiThreaded
// one. The allocator idles exactly these (of the free ones), so the set follows from the
// CPUs alone and a state rebuilt from the runtime's cpusets gets them back.
func (n *Node) IdledSiblings(pool string, cpus cpuset.CPUSet) cpuset.CPUSet {
	ix, ok := n.index[pool]
	if !ok || !ix.SingleThreaded() {
		return cpuset.New()
	}
	own := allocate.SetOf(cpus)
	return ix.CoreThreads(own).Difference(own).CPUSet()
}

// commaList renders CPUs as "2,3,50,51", the form of EXCLUSIVE_CPUS and SHARED_CPUS.
func commaList(cs cpuset.CPUSet) string {
	ids := cs.List()
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}
