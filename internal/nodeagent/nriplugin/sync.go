package nriplugin

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/podapi"
)

// syncReport says what a Synchronize did, for the log and tests.
type syncReport struct {
	containers, derived, restored, adopted, unmanaged, dropped int
}

// Synchronize rebuilds the state from the runtime's live containers (see rebuild). Known
// allocations come from the checkpoint (as New read it) on the first call and from memory
// on later ones (reconnects). Allocations of containers that are gone are dropped. No
// container is ever updated. It reads no file and calls no API (Prepare did, before the
// connection).
func (a *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (_ []*api.ContainerUpdate, err error) {
	defer a.recovered("Synchronize", &err)
	a.reconf.Lock()
	defer a.reconf.Unlock()
	a.mu.Lock()
	first := a.syncs == 0
	known := a.state.Unsorted() // order does not matter below
	a.mu.Unlock()
	if first { // read by New
		if a.loadErr != nil {
			a.log.Error("checkpoint unreadable; rebuilding from the runtime alone", "err", a.loadErr)
		}
		known, a.loaded, a.loadErr = a.loaded, nil, nil
	}
	if err := a.kubelet.refresh(pods); err != nil { // for derive, from the List made before connecting; it does without
		a.log.Warn("containers of pods without a pool request annotation are rebuilt without their kubelet devices", "err", err)
	}
	next, hold, rep := a.rebuild(known, pods, ctrs)

	a.mu.Lock()
	a.state, a.hold = next, hold
	a.persistDiff(known, next.Unsorted())
	due := false
	if first && a.next != nil {
		a.pending, a.next = &pending{node: a.next, since: time.Now()}, nil
	}
	if p := a.pending; p != nil { // the containers that blocked it may be gone
		if _, blocking := a.blockers(p.node); len(blocking) == 0 {
			p.blocking, due = blocking, true // the taker writes it down, then takes it (layout.go)
		} else if err := a.pend(p.node, p.since, blocking); first {
			a.log.Warn("pool config read at start is pending", "err", err)
		}
	}
	a.syncs++
	close(a.syncC)
	a.syncC = make(chan struct{})
	a.mu.Unlock()
	if due {
		a.wakeTaker()
	}
	a.log.Info("synchronized", "containers", rep.containers, "derived", rep.derived, "restored", rep.restored,
		"adopted", rep.adopted, "unmanaged", rep.unmanaged, "dropped", rep.dropped)
	views := a.epcViews(pods, ctrs) // the SGX EPC of DRA claims (claims.go)
	_ = a.notify("Synchronize", func(e Extension) (bool, error) {
		h, ok := e.(Synchronizer)
		if !ok {
			return false, nil
		}
		return true, h.Synchronize(ctx, views, ctrs)
	})
	return nil, nil
}

// liveCtr is a runtime container with its pod.
type liveCtr struct {
	key  allocation.Key
	pod  *api.PodSandbox
	ctr  *api.Container
	cpus cpuset.CPUSet
	set  bool // the runtime reported a cpuset
	kept bool // a native sidecar's stopped instance, holding on for the next one
}

// claim is what one live container is taken to hold, and where that came from.
type claim struct {
	lc  liveCtr
	al  allocation.Allocation
	how string // "derived", "restored" or "adopted"
}

// rebuild computes the new state. What a live container holds is, in order of trust:
//  1. derived from the runtime alone: its pool request (the same annotations CreateContainer
//     read, and the kubelet's devices as Synchronize read them) and the cpuset it runs on, when these agree with what podfence would have set.
//     This gives back every field CreateContainer recorded, for every pool type, so a lost
//     or lagging checkpoint loses nothing; a record that disagrees is replaced.
//  2. its checkpoint record, when the container runs where the record says;
//  3. adopted from its cpuset alone (containers podfence did not place; see adoption).
//
// Exclusive CPUs are claimed before idled siblings, so a sibling is idled only when no live
// container runs on it.
func (a *Plugin) rebuild(known []allocation.Allocation, pods []*api.PodSandbox, ctrs []*api.Container) (*plan.Ledger, *holders,
	syncReport) {
	node := a.node.Load()
	live := a.liveContainers(pods, ctrs)
	byKey := make(map[allocation.Key]allocation.Allocation, len(known))
	for _, al := range known {
		byKey[al.Key()] = al
	}
	rep := syncReport{containers: len(live)}
	var claims []claim
	for _, lc := range live {
		rec, hasRec := byKey[lc.key]
		if al, ok := a.derive(node, lc); ok {
			if hasRec && !sameAllocation(rec, al) {
				a.log.Warn("checkpoint record disagrees with the runtime; using what the runtime shows", "pod", podName(lc.pod),
					"container", lc.key.Container, "record", describe(rec), "runtime", describe(al))
			}
			claims = append(claims, claim{lc: lc, al: al, how: "derived"})
			continue
		}
		if hasRec && a.runsAsRecorded(node, rec, lc) {
			claims = append(claims, claim{lc: lc, al: rec, how: "restored"})
			continue
		}
		if al, ok := a.adoption(lc); ok {
			claims = append(claims, claim{lc: lc, al: al, how: "adopted"})
			continue
		}
		rep.unmanaged++
	}
	next, hold := plan.NewLedger(node), newHolders()
	held := make([]cpuset.CPUSet, len(claims))
	for i, c := range claims {
		held[i] = c.al.CPUs
	}
	running := cpuset.New().Union(held...) // one union: a union per claim copies the set each time
	for _, c := range claims {
		al := c.al
		al.Idled = al.Idled.Difference(running)
		if err := next.Add(al); err != nil {
			a.log.Warn("cannot keep what a running container holds: it conflicts with another; left unmanaged",
				"pod", podName(c.lc.pod), "container", c.lc.key.Container, "from", c.how, "err", err)
			rep.unmanaged++
			continue
		}
		hold.add(c.lc.key, c.lc.ctr.GetId(), c.lc.ctr.GetPodSandboxId())
		if c.lc.kept {
			hold.keep(c.lc.ctr.GetId())
		}
		switch c.how {
		case "derived":
			rep.derived++
		case "restored":
			rep.restored++
		default:
			rep.adopted++
			a.log.Info("adopted", "pod", podName(c.lc.pod), "container", c.lc.key.Container, "pool", al.Pool,
				"cpus", c.lc.cpus.String(), "milliCPU", al.MilliCPU)
		}
	}
	for k := range byKey {
		if _, ok := hold.holderOf(k); !ok {
			rep.dropped++
		}
	}
	return next, hold, rep
}

// liveContainers lists the runtime's containers that are not stopped, one per key, in
// container ID order (so a rebuild is deterministic), then the newest stopped instance of each
// native sidecar (podfence.io/sidecars) that no live instance replaces: what it held is kept
// for its next instance (StopContainer).
func (a *Plugin) liveContainers(pods []*api.PodSandbox, ctrs []*api.Container) []liveCtr {
	podByID := make(map[string]*api.PodSandbox, len(pods))
	for _, p := range pods {
		podByID[p.GetId()] = p
	}
	sorted := slices.SortedFunc(slices.Values(ctrs), func(x, y *api.Container) int { return strings.Compare(x.GetId(), y.GetId()) })
	var live []liveCtr
	seen := map[allocation.Key]bool{}
	for _, c := range sorted {
		p := podByID[c.GetPodSandboxId()]
		if p == nil || c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		if seen[keyOf(p, c)] {
			a.log.Warn("two live instances of one container; using the first", "pod", podName(p), "container", c.GetName(), "id", c.GetId())
			continue
		}
		seen[keyOf(p, c)] = true
		live = append(live, newLiveCtr(p, c, false))
	}
	newest := slices.SortedFunc(slices.Values(sorted), func(x, y *api.Container) int {
		return cmp.Or(cmp.Compare(y.GetCreatedAt(), x.GetCreatedAt()), strings.Compare(y.GetId(), x.GetId()))
	})
	for _, c := range newest {
		p := podByID[c.GetPodSandboxId()] // nil for a gone pod: its annotations name no sidecar
		if c.GetState() != api.ContainerState_CONTAINER_STOPPED || !podapi.IsSidecar(p.GetAnnotations(), c.GetName()) ||
			seen[keyOf(p, c)] {
			continue
		}
		seen[keyOf(p, c)] = true
		live = append(live, newLiveCtr(p, c, true))
	}
	return live
}

// newLiveCtr is container c of pod p with the cpuset the runtime reports.
func newLiveCtr(p *api.PodSandbox, c *api.Container, kept bool) liveCtr {
	lc := liveCtr{key: keyOf(p, c), pod: p, ctr: c, kept: kept}
	if text := c.GetLinux().GetResources().GetCpu().GetCpus(); text != "" {
		cpus, err := topology.ParseCPUList(text)
		lc.cpus, lc.set = cpus, err == nil
	}
	return lc
}

// runsAsRecorded reports whether a recorded allocation fits the node and the container runs
// on its CPUs (or the runtime did not say where it runs).
func (a *Plugin) runsAsRecorded(node *plan.Node, al allocation.Allocation, lc liveCtr) bool {
	probe := plan.NewLedger(node)
	if err := probe.Add(al); err != nil {
		a.log.Warn("checkpoint record does not fit the node; rebuilding the container from the runtime",
			"pod", podName(lc.pod), "container", lc.key.Container, "record", describe(al), "err", err)
		return false
	}
	if d := node.Decide(al); lc.set && !d.CPUs.Equals(onlineOf(node, lc.cpus)) {
		a.log.Warn("container runs elsewhere than recorded; rebuilding it from the runtime", "pod", podName(lc.pod),
			"container", lc.key.Container, "recorded", d.CPUs.String(), "running", lc.cpus.String())
		return false
	}
	return true
}

// persistDiff queues the checkpoint changes from the known allocations to now. The caller
// holds mu.
func (a *Plugin) persistDiff(known, now []allocation.Allocation) {
	old := make(map[allocation.Key]allocation.Allocation, len(known))
	for _, al := range known {
		old[al.Key()] = al
	}
	for _, al := range now {
		if !recorded(al) {
			continue // a record left by an older agent is deleted below
		}
		if o, ok := old[al.Key()]; !ok || !sameAllocation(o, al) {
			a.persist.put(al)
		}
		delete(old, al.Key())
	}
	for k := range old {
		a.persist.del(k)
	}
}

func sameAllocation(x, y allocation.Allocation) bool {
	return x.PodUID == y.PodUID && x.Namespace == y.Namespace && x.Pod == y.Pod && x.Container == y.Container &&
		x.Pool == y.Pool && x.Type == y.Type && x.SharedPool == y.SharedPool && x.MilliCPU == y.MilliCPU &&
		sameCPUs(x.CPUs, y.CPUs) && sameCPUs(x.Idled, y.Idled)
}

// sameCPUs compares CPU sets by content (cpuset.Equals tells an empty set read back from a
// record from a zero one).
func sameCPUs(x, y cpuset.CPUSet) bool { return x.Size() == y.Size() && x.IsSubsetOf(y) }
