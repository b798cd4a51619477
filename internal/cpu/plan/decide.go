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
	"github.com/podfence/podfence/internal/pinning"
)

// Environment variables that tell the application its CPUs, as CPU-Pooler sets them.
const (
	EnvExclusiveCPUs = "EXCLUSIVE_CPUS"
	EnvSharedCPUs    = "SHARED_CPUS"
	// EnvCPUPools names the container's pool types: "exclusive", "shared" or
	// "exclusive&shared"; unset for a default-pool container.
	EnvCPUPools = "CPU_POOLS"
	// EnvContainerName is the container's name, for an exclusive container or one the
	// process pinning annotation names.
	EnvContainerName = "CONTAINER_NAME"
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
	// given once checked to be free CPUs of the requested exclusive pools. An exclusive pool
	// none of them is in gets the allocator's choice.
	ExclusiveCPUs cpuset.CPUSet
	// Pinned says the process pinning annotation names the container, and Processes are its
	// entry there (PinningOf its pod's annotations). It gets CONTAINER_NAME, as CPU-Pooler's
	// webhook gives it, and is refused when the processes do not fit what it gets
	// (pinning.Check), as the process starter could not run them.
	Pinned    bool
	Processes []pinning.Process
}

// PinningOf reads the process pinning annotation (podfence.io/cpus, else CPU-Pooler's
// nokia.k8s.io/cpus) in the first of the annotation maps that has one (a pod's, then a
// container's where the runtime copied the pod's there): the processes of container, and
// whether it names the container. An annotation that does not parse is an error: the starter
// could not run the pod's pinned processes. The agent, its starter and `podfence plan` all
// read it here.
func PinningOf(container string, annotations ...map[string]string) ([]pinning.Process, bool, error) {
	for _, m := range annotations {
		spec, ok, err := pinning.FromAnnotations(m)
		if !ok {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		procs, named := spec.For(container)
		return procs, named, nil
	}
	return nil, false, nil
}

// Key is the container's state key.
func (c Container) Key() allocation.Key { return allocation.Key{PodUID: c.PodUID, Container: c.Name} }

func (c Container) podName() string { return c.Namespace + "/" + c.Pod }

// Plan decides for one container without changing s. A container that already holds an
// allocation gets the decision it had (Existing), so a running container's CPUs never move.
func (n *Node) Plan(s *Ledger, c Container) (Decision, error) {
	if a, ok := s.Get(c.Key()); ok {
		d := n.decideFor(c, a)
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
	d := n.decideFor(c, a)
	if c.Pinned {
		if err := pinning.Check(c.Processes, pinningPools(a)); err != nil {
			return Decision{}, &Refusal{Pod: c.podName(), Container: c.Name, Code: CodeProcessPinning, Reason: "process pinning: " + err.Error()}
		}
	}
	return d, nil
}

// pinningPools is what a gives the container, as pinning.Check takes it.
func pinningPools(a allocation.Allocation) pinning.Pools {
	p := pinning.Pools{Shared: a.SharedPool, MilliCPU: int(a.MilliCPU)}
	if a.Type == allocation.TypeExclusive {
		p.Exclusive, p.MoreExclusive, p.CPUs = a.Pool, a.ExtraPools, a.CPUs.Size()
	}
	return p
}

// decideFor is decide for container c: a pinned one gets CONTAINER_NAME whatever its pool.
func (n *Node) decideFor(c Container, a allocation.Allocation) Decision {
	d := n.decide(a)
	if c.Pinned && d.EnvValue(EnvContainerName) == "" {
		d.Env = append(d.Env, EnvVar{Name: EnvContainerName, Value: c.Name})
	}
	return d
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

// allocation computes what c would hold. A pool of the default type in the request is
// passed over, as CPU-Pooler does: the container runs on the default pool.
func (n *Node) allocation(s *Ledger, c Container) (allocation.Allocation, error) {
	a := allocation.Allocation{PodUID: c.PodUID, Namespace: c.Namespace, Pod: c.Pod, Container: c.Name,
		Pool: n.Pools.Default.Name, Type: allocation.TypeDefault}
	if c.Sandbox {
		return a, nil
	}
	var excl []string // exclusive pools, sorted
	units := map[string]int{}
	for _, name := range c.Request.Pools() {
		q := c.Request[name]
		if pools.TypeOf(name) == allocation.TypeDefault {
			continue
		}
		p, ok := n.Pools.Pool(name)
		if !ok {
			return a, refuse(CodeUnknownPool, "pool %q (resource %s) does not exist on this node; its pools are %v",
				name, pools.ResourceName(name), n.poolNames(""))
		}
		switch p.Type {
		case allocation.TypeExclusive:
			if size := p.Devices.Size(); q.Cmp(*resource.NewQuantity(int64(size), resource.DecimalSI)) > 0 {
				return a, refuse(CodeExclusiveTooLarge, "asks %s=%s, but exclusive pool %q has %d %s",
					pools.ResourceName(name), q.String(), name, size, unitNoun(UnitOf(p), size))
			}
			if q.MilliValue()%1000 != 0 || q.Sign() <= 0 {
				return a, refuse(CodeFractionalExclusive,
					"exclusive pool %q counts whole CPUs: %s=%s is not a whole number above 0 (ask for 1, 2, ...)",
					name, pools.ResourceName(name), q.String())
			}
			excl, units[name] = append(excl, name), int(q.Value())
		case allocation.TypeShared:
			if err := n.shareOf(s, &a, name, q); err != nil {
				return a, err
			}
		}
	}
	if len(excl) == 0 {
		if a.MilliCPU > 0 {
			a.Pool, a.Type = a.SharedPool, allocation.TypeShared
		}
		return a, nil
	}
	a.Pool, a.Type, a.ExtraPools, a.CPUs, a.Idled = excl[0], allocation.TypeExclusive, excl[1:], cpuset.New(), cpuset.New()
	if err := n.checkGiven(a, c.ExclusiveCPUs); err != nil {
		return a, err
	}
	for _, name := range excl {
		if err := n.exclusive(s, &a, name, units[name], c.ExclusiveCPUs); err != nil {
			return a, err
		}
	}
	if len(a.ExtraPools) == 0 {
		a.ExtraPools = nil
	}
	return a, nil
}

// checkGiven checks that the given CPUs are all in a's exclusive pools.
func (n *Node) checkGiven(a allocation.Allocation, given cpuset.CPUSet) error {
	in := allocate.Set{}
	for _, name := range a.ExclusivePools() {
		in = in.Union(n.index[name].Pool())
	}
	if allocate.SetOf(given).IsSubsetOf(in) {
		return nil
	}
	var desc []string // only for the refusal: rendering the pools costs more than the check
	for _, name := range a.ExclusivePools() {
		desc = append(desc, fmt.Sprintf("%q (%s)", name, n.index[name].Pool()))
	}
	return refuse(CodeCPUsUnavailable, "given CPUs %s are not all in exclusive pool %s", given, strings.Join(desc, " or "))
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

// exclusive adds want units of exclusive pool name to a's CPUs: the given CPUs in that pool
// after checks, else the allocator's choice. Given CPUs of a WholeCore pool stand for their
// whole cores.
func (n *Node) exclusive(s *Ledger, a *allocation.Allocation, name string, want int, given cpuset.CPUSet) error {
	ix, free := n.index[name], s.free[name]
	mine := allocate.SetOf(given).Intersection(ix.Pool())
	iso, hasIso := n.isolated[name]
	if mine.Size() == 0 {
		r, err := ix.Exclusive(free, want)
		if hasIso {
			r, err = ix.ExclusiveFrom(free, want, iso.eligible, iso.only)
		}
		var short *allocate.InsufficientError
		if errors.As(err, &short) && iso.only {
			return refuse(CodeNotEnoughIsolatedCPUs, "exclusive pool %q takes only CPUs the host isolated (isolatedCPUs: "+
				"require): %v; its isolated CPUs free: %s (of %s)", name, err, orNone(free.Intersection(iso.eligible)),
				orNone(iso.eligible))
		}
		if errors.As(err, &short) {
			return refuse(CodeNotEnoughCPUs, "exclusive pool %q: %v", name, err)
		}
		if err != nil {
			return refuse(CodeInvalidRequest, "exclusive pool %q: %v", name, err)
		}
		a.CPUs, a.Idled = a.CPUs.Union(r.CPUs.CPUSet()), a.Idled.Union(r.Idled.CPUSet())
		return nil
	}
	if ix.Unit() == allocate.WholeCore {
		mine = ix.CoreThreads(mine)
	}
	cpus := mine.CPUSet()
	switch got := n.Units(name, cpus); {
	case got != want:
		return refuse(CodeInvalidRequest, "given CPUs %s are %d %s, but the container asks %d of pool %q", cpus, got,
			unitNoun(ix.Unit(), got), want, name)
	case ix.Unit() == allocate.CoreOneThread && got != cpus.Size():
		return refuse(CodeInvalidRequest, "given CPUs %s hold two threads of one core, but singleThreaded pool %q gives a "+
			"container one thread per core", cpus, name)
	case iso.only && !mine.IsSubsetOf(iso.eligible):
		return refuse(CodeCPUsNotIsolated, "given CPUs %s of pool %q are not all isolated by the host (isolatedCPUs: require): "+
			"%s are not; its isolated CPUs free: %s", cpus, name, mine.Difference(iso.eligible), orNone(free.Intersection(iso.eligible)))
	case !mine.IsSubsetOf(free):
		return refuse(CodeCPUsUnavailable, "given CPUs %s of pool %q are held by %s", mine.Difference(free), name,
			s.holders(mine.Difference(free)))
	}
	idled := n.IdledSiblings(name, cpus)
	if held := allocate.SetOf(idled).Difference(free); held.Size() > 0 {
		return refuse(CodeCPUsUnavailable, "given CPUs %s of singleThreaded pool %q share cores with CPUs %s held by %s: "+
			"a singleThreaded container has its cores to itself", cpus, name, held, s.holders(held))
	}
	a.CPUs, a.Idled = a.CPUs.Union(cpus), a.Idled.Union(idled)
	return nil
}

// unitNoun names n of a pool's request unit.
func unitNoun(u allocate.Unit, n int) string {
	noun := "physical core"
	if u == allocate.Thread {
		noun = "CPU"
	}
	if n != 1 {
		noun += "s"
	}
	return noun
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

// orNone is a CPU list, or "none".
func orNone(s allocate.Set) string {
	if s.Size() == 0 {
		return "none"
	}
	return s.String()
}
