package nriplugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/observe/status"
)

// pending is the agent's pending layout; blocking is keyed for O(1) work per release.
type pending struct {
	node     *plan.Node
	since    time.Time
	blocking map[allocation.Key]status.Blocker
}

// ErrPending is wrapped by Reload's error when the new layout waits for containers to end.
var ErrPending = errors.New("running containers would have to move")

// Reload switches the agent to a new node layout, such as a changed pool config, without
// moving any container: every running container must keep its cpuset, memory nodes and
// quota under the new layout, and every exclusive allocation must fit it as it is. If one
// does not, the old layout stays in force and the new one is pending (see Pending): it is
// taken as soon as the last container blocking it is released (or at RetryReload), and a
// newer Reload replaces it. The error names the blocking containers. A layout taken is
// written down (Options.LayoutChanged) before it is in force (see take).
func (a *Plugin) Reload(node *plan.Node) error {
	a.layoutMu.Lock()
	defer a.layoutMu.Unlock()
	_, err := a.take(node, time.Now())
	return err
}

// RetryReload tries the pending layout again; it reports whether one was taken.
func (a *Plugin) RetryReload() bool {
	a.layoutMu.Lock()
	defer a.layoutMu.Unlock()
	a.mu.Lock()
	p := a.pending
	a.mu.Unlock()
	if p == nil {
		return false
	}
	taken, _ := a.take(p.node, p.since)
	if taken {
		a.log.Info("pending pool config taken: no running container blocks it any more", "poolConfig", p.node.Pools.Source)
	}
	return taken
}

// PendingReload returns the pending layout, if any: a pool config read but not taken yet,
// because the running containers it lists must end first.
func (a *Plugin) PendingReload() (status.PendingPoolConfig, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		return status.PendingPoolConfig{}, false
	}
	out := status.PendingPoolConfig{Source: a.pending.node.Pools.Source, Since: a.pending.since}
	for _, b := range a.pending.blocking {
		out.Blocking = append(out.Blocking, b)
	}
	slices.SortFunc(out.Blocking, func(x, y status.Blocker) int {
		return strings.Compare(x.Namespace+"/"+x.Pod+"/"+x.Container, y.Namespace+"/"+y.Pod+"/"+y.Container)
	})
	return out, true
}

// pend makes node the pending layout, blocked by blocking, and returns the error that names
// them. The caller holds mu.
func (a *Plugin) pend(node *plan.Node, since time.Time, blocking map[allocation.Key]status.Blocker) error {
	a.pending = &pending{node: node, since: since, blocking: blocking}
	var reasons []string
	for k, b := range blocking {
		reasons = append(reasons, fmt.Sprintf("container %s (%s/%s %s): %s", k, b.Namespace, b.Pod, b.Container, b.Reason))
	}
	slices.Sort(reasons)
	return fmt.Errorf("new pool config %s waits and the old one stays in force: %w: %s",
		filepath.Base(node.Pools.Source), ErrPending, strings.Join(reasons, "; "))
}

// blockers checks every allocation against node: the state it would have there, and the
// containers that would have to move. The caller holds mu.
func (a *Plugin) blockers(node *plan.Node) (*plan.Ledger, map[allocation.Key]status.Blocker) {
	cur := a.node.Load()
	allocs := a.state.Allocations()
	blocking := map[allocation.Key]status.Blocker{}
	block := func(al allocation.Allocation, reason string) {
		b := status.Blocker{Namespace: al.Namespace, Pod: al.Pod, Container: al.Container, Reason: reason}
		if old, ok := blocking[al.Key()]; ok {
			b.Reason = old.Reason + "; " + reason
		}
		blocking[al.Key()] = b
	}
	for _, c := range checkpoint.Validate(allocs, node.Topology.Online(), node.PoolCPUs()) {
		al, _ := a.state.Get(c.Key)
		block(al, c.Reason)
	}
	held := make([]cpuset.CPUSet, len(allocs))
	for i, al := range allocs {
		held[i] = al.CPUs
	}
	running := cpuset.New().Union(held...)
	next := plan.NewLedger(node)
	for _, al := range allocs {
		if _, ok := blocking[al.Key()]; ok {
			continue
		}
		// Idled siblings follow the new pool's policy, as a rebuild from the runtime has them;
		// under singleThreaded a container has its cores to itself.
		siblings := node.IdledSiblings(al.Pool, al.CPUs)
		if shared := siblings.Intersection(running); !shared.IsEmpty() {
			block(al, fmt.Sprintf("CPUs %s share cores with CPUs %s of other containers, and pool %q would be singleThreaded",
				al.CPUs, shared, al.Pool))
			continue
		}
		al.Idled = siblings
		if err := next.Add(al); err != nil {
			block(al, err.Error())
			continue
		}
		was, will := cur.Decide(al), node.Decide(al)
		if !was.CPUs.Equals(will.CPUs) || !was.Mems.Equals(will.Mems) || was.Quota != will.Quota || was.Period != will.Period {
			block(al, fmt.Sprintf("runs on CPUs %s (mems %s, quota %d/%d), would move to %s (mems %s, quota %d/%d)",
				was.CPUs, was.Mems, was.Quota, was.Period, will.CPUs, will.Mems, will.Quota, will.Period))
		}
	}
	return next, blocking
}

// unblocked is called when k is released: a pending layout that k blocked loses it, and
// is due for a retry: others may have been blocked by k's CPUs too (a singleThreaded pool's
// sibling of theirs that k ran on). The caller holds mu.
func (a *Plugin) unblocked(k allocation.Key) {
	p := a.pending
	if p == nil {
		return
	}
	if _, ok := p.blocking[k]; !ok {
		return
	}
	delete(p.blocking, k)
	a.retryDue = true
}

// retryIfDue wakes the taker if the pending layout's last blocker was released: the event
// that released it does not wait for the layout to be written down. The caller holds no lock.
func (a *Plugin) retryIfDue() {
	a.mu.Lock()
	due := a.retryDue
	a.retryDue = false
	a.mu.Unlock()
	if due {
		a.wakeTaker()
	}
}

// layoutChanged tells the listener the layout to write down. The caller holds layoutMu and
// no other lock.
func (a *Plugin) layoutChanged(node *plan.Node) {
	if a.onLayout != nil {
		a.onLayout(node)
	}
}

// SetTopology switches the agent to topo, the node's CPUs as online now (some taken offline
// or brought back), with the same pool configs. It takes effect at once, whatever runs:
// an offline CPU is never handed out. Running containers keep what they hold; CPUs of theirs
// that went offline stay held (in no free set) until they end, and a pool's offline CPUs are
// reported (pools.Node.Offline) until they are back.
func (a *Plugin) SetTopology(topo *topology.Topology) error {
	a.layoutMu.Lock() // the layout is written down after the swap, in order with take's
	defer a.layoutMu.Unlock()
	a.reconf.Lock()
	a.mu.Lock()
	cur := a.node.Load()
	node, err := onTopology(cur, topo)
	if err != nil {
		a.mu.Unlock()
		a.reconf.Unlock()
		return fmt.Errorf("CPUs online now %s: %w", topo.Online(), err)
	}
	next := plan.NewLedger(node)
	for _, al := range a.state.Allocations() {
		if err := next.Add(al); err != nil { // not expected: the same config keeps every CPU
			a.log.Error("allocation does not fit the CPUs online now; dropped", "container", al.Key(), "err", err)
			a.hold.remove(al.Key())
		}
	}
	a.node.Store(node)
	a.state = next
	if p := a.pending; p != nil {
		if p.node, err = onTopology(p.node, topo); err != nil {
			a.log.Error("pending pool config dropped: it does not fit the CPUs online now", "err", err)
			a.pending = nil
		}
	}
	a.mu.Unlock()
	a.reconf.Unlock()
	a.layoutChanged(node)
	return nil
}

// onTopology resolves n's pool config again on topo.
func onTopology(n *plan.Node, topo *topology.Topology) (*plan.Node, error) {
	if n.Pools.Config == nil {
		return nil, errors.New("the pool layout has no config to resolve again")
	}
	layout, err := pools.Resolve(n.Pools.Config, topo)
	if err != nil {
		return nil, err
	}
	return plan.NewNode(topo, layout, n.Policy), nil
}

// Node returns the layout in force.
func (a *Plugin) Node() *plan.Node { return a.node.Load() }
