package nri

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/podfence/podfence/plan"
	"github.com/podfence/podfence/state"
	"github.com/podfence/podfence/topology"
	"k8s.io/utils/cpuset"
)

// syncReport says what a Synchronize did, for the log and tests.
type syncReport struct {
	containers, restored, adopted, unmanaged, dropped int
}

// Synchronize rebuilds the state from the runtime's live containers. Known allocations come
// from the checkpoint on the first call and from memory on later ones (reconnects). A live
// container keeps a known allocation whose CPUs match the cpuset it runs on; any other live
// container is adopted as it runs (see adopt). Allocations of containers that are gone are
// dropped. No container is ever updated.
func (a *Agent) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (_ []*api.ContainerUpdate, err error) {
	defer a.recovered("Synchronize", &err)
	a.reconf.Lock()
	defer a.reconf.Unlock()
	a.mu.Lock()
	first := a.syncs == 0
	known := a.state.Allocations()
	a.mu.Unlock()
	if first {
		recs, lerr := a.store.Load()
		if lerr != nil {
			a.log.Error("checkpoint unreadable; rebuilding from the runtime's cpusets alone", "err", lerr)
		}
		known = recs
	}
	next, ids, rep := a.rebuild(known, pods, ctrs)

	a.mu.Lock()
	a.state, a.ids, a.keys = next, ids, map[string]state.Key{}
	for k, id := range ids {
		a.keys[id] = k
	}
	a.persistDiff(known, next.Allocations())
	a.syncs++
	close(a.syncC)
	a.syncC = make(chan struct{})
	a.mu.Unlock()
	a.log.Info("synchronized", "containers", rep.containers, "restored", rep.restored, "adopted", rep.adopted,
		"unmanaged", rep.unmanaged, "dropped", rep.dropped)
	_ = a.notify("Synchronize", func(e Extension) (bool, error) {
		h, ok := e.(Synchronizer)
		if !ok {
			return false, nil
		}
		return true, h.Synchronize(ctx, pods, ctrs)
	})
	return nil, nil
}

// liveCtr is a runtime container with its pod.
type liveCtr struct {
	key  state.Key
	pod  *api.PodSandbox
	ctr  *api.Container
	cpus cpuset.CPUSet
	set  bool // the runtime reported a cpuset
}

// rebuild computes the new state: first the known allocations that still run where
// recorded, then adoptions, so that adopted containers never take a known one's CPUs.
func (a *Agent) rebuild(known []state.Allocation, pods []*api.PodSandbox, ctrs []*api.Container) (*plan.State, map[state.Key]string, syncReport) {
	podByID := make(map[string]*api.PodSandbox, len(pods))
	for _, p := range pods {
		podByID[p.GetId()] = p
	}
	var live []liveCtr
	seen := map[state.Key]bool{}
	for _, c := range ctrs {
		p := podByID[c.GetPodSandboxId()]
		if p == nil || c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		lc := liveCtr{key: keyOf(p, c), pod: p, ctr: c}
		if seen[lc.key] {
			a.log.Warn("two live instances of one container; using the first", "pod", podName(p), "container", c.GetName(), "id", c.GetId())
			continue
		}
		seen[lc.key] = true
		if text := c.GetLinux().GetResources().GetCpu().GetCpus(); text != "" {
			cpus, err := topology.ParseCPUList(text)
			lc.cpus, lc.set = cpus, err == nil
		}
		live = append(live, lc)
	}
	byKey := make(map[state.Key]state.Allocation, len(known))
	for _, al := range known {
		byKey[al.Key()] = al
	}
	next, ids := plan.NewState(a.node.Load()), map[state.Key]string{}
	rep := syncReport{containers: len(live)}
	var rest []liveCtr
	for _, lc := range live {
		if al, ok := byKey[lc.key]; ok && a.restore(next, al, lc) {
			ids[lc.key] = lc.ctr.GetId()
			rep.restored++
			continue
		}
		rest = append(rest, lc)
	}
	for _, lc := range rest {
		if a.adopt(next, lc) {
			ids[lc.key] = lc.ctr.GetId()
			rep.adopted++
		} else {
			rep.unmanaged++
		}
	}
	for k := range byKey {
		if _, ok := ids[k]; !ok {
			rep.dropped++
		}
	}
	return next, ids, rep
}

// restore adds a known allocation if the container runs on its CPUs (or the runtime did
// not say where it runs).
func (a *Agent) restore(s *plan.State, al state.Allocation, lc liveCtr) bool {
	if err := s.Add(al); err != nil {
		a.log.Warn("recorded allocation no longer fits; adopting the container as it runs",
			"pod", podName(lc.pod), "container", lc.key.Container, "err", err)
		return false
	}
	d, err := a.node.Load().Plan(s, plan.Container{PodUID: al.PodUID, Name: al.Container})
	if err == nil && (!lc.set || d.CPUs.Equals(lc.cpus)) {
		return true
	}
	s.Release(al.Key())
	a.log.Warn("container runs elsewhere than recorded; adopting it as it runs", "pod", podName(lc.pod),
		"container", lc.key.Container, "recorded", d.CPUs.String(), "running", lc.cpus.String())
	return false
}

// adopt records a container the agent did not place, as it runs: a cpuset inside one
// exclusive pool (plus, optionally, the whole shared pool) holds those exclusive CPUs; a
// cpuset that is the shared pool, with a CFS quota, holds that share of it. Other containers
// (default pool, no cpuset, spanning pools) hold nothing and stay unmanaged.
func (a *Agent) adopt(s *plan.State, lc liveCtr) bool {
	al, ok := a.adoption(lc)
	if !ok {
		return false
	}
	if err := s.Add(al); err != nil {
		a.log.Warn("cannot adopt container: its CPUs are taken", "pod", podName(lc.pod), "container", lc.key.Container,
			"cpus", lc.cpus.String(), "err", err)
		return false
	}
	a.log.Info("adopted", "pod", podName(lc.pod), "container", lc.key.Container, "pool", al.Pool,
		"cpus", lc.cpus.String(), "milliCPU", al.MilliCPU)
	return true
}

func (a *Agent) adoption(lc liveCtr) (state.Allocation, bool) {
	if !lc.set || lc.cpus.IsEmpty() {
		return state.Allocation{}, false
	}
	al := state.Allocation{PodUID: lc.key.PodUID, Namespace: lc.pod.GetNamespace(), Pod: lc.pod.GetName(), Container: lc.key.Container}
	shared, hasShared := a.node.Load().Pools.Shared()
	rest := lc.cpus
	for _, p := range a.node.Load().Pools.Pools {
		if in := lc.cpus.Intersection(p.CPUs); p.Type == state.TypeExclusive && !in.IsEmpty() {
			al.Pool, al.Type, al.CPUs, rest = p.Name, state.TypeExclusive, in, lc.cpus.Difference(p.CPUs)
			break
		}
	}
	if !rest.IsEmpty() && !(hasShared && rest.Equals(shared.CPUs)) {
		return state.Allocation{}, false // spans pools other than one exclusive and the shared one
	}
	if hasShared && rest.Equals(shared.CPUs) {
		cpu := lc.ctr.GetLinux().GetResources().GetCpu()
		quota, period := cpu.GetQuota().GetValue(), int64(cpu.GetPeriod().GetValue())
		if quota <= 0 || period <= 0 {
			return state.Allocation{}, false // no bandwidth limit: not a podfence share
		}
		milli := quota*1000/period - int64(al.CPUs.Size())*1000
		if milli <= 0 {
			return state.Allocation{}, false
		}
		al.SharedPool, al.MilliCPU = shared.Name, milli
		if al.Type == "" {
			al.Pool, al.Type = shared.Name, state.TypeShared
		}
	}
	return al, true
}

// persistDiff queues the checkpoint changes from the known allocations to now. The caller
// holds mu.
func (a *Agent) persistDiff(known, now []state.Allocation) {
	old := make(map[state.Key]state.Allocation, len(known))
	for _, al := range known {
		old[al.Key()] = al
	}
	for _, al := range now {
		if o, ok := old[al.Key()]; !ok || !sameAllocation(o, al) {
			a.persist.put(al)
		}
		delete(old, al.Key())
	}
	for k := range old {
		a.persist.del(k)
	}
}

func sameAllocation(x, y state.Allocation) bool {
	return x.PodUID == y.PodUID && x.Namespace == y.Namespace && x.Pod == y.Pod && x.Container == y.Container &&
		x.Pool == y.Pool && x.Type == y.Type && x.SharedPool == y.SharedPool && x.MilliCPU == y.MilliCPU &&
		x.CPUs.Equals(y.CPUs) && x.Idled.Equals(y.Idled)
}
