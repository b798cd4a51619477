package nriplugin

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
)

// Taking a new layout writes it down (Options.LayoutChanged: the layout in force, on disk)
// before any container is answered by it, so that a restarted agent starts with the layout
// its running containers were placed by. That write must not happen inside an NRI event, nor
// under the locks the events take: the event that releases a pending layout's last blocker
// (or the Synchronize that finds none) only wakes the taker, a goroutine that takes it. While
// the layout is written, the old one stays in force and every container created meanwhile
// must fit the new one as it runs (else it is refused, for the kubelet to retry), so that the
// new one can still be taken once written.

// taker takes due layouts in the background (RetryReload) when woken.
type taker struct {
	wake chan struct{} // capacity 1
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	woken  uint64 // wakes so far
	served uint64 // wakes served so far
}

func (a *Plugin) startTaker() {
	t := &taker{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	a.taker = t
	go func() {
		defer close(t.done)
		for {
			select {
			case <-t.stop:
				return
			case <-t.wake:
			}
			t.mu.Lock()
			upTo := t.woken
			t.mu.Unlock()
			a.RetryReload()
			t.mu.Lock()
			t.served = upTo
			t.cond.Broadcast()
			t.mu.Unlock()
		}
	}()
}

// wakeTaker has the taker try the pending layout; it never waits.
func (a *Plugin) wakeTaker() {
	t := a.taker
	t.mu.Lock()
	t.woken++
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// waitTaker waits until the taker has served every wake made before the call, or stopped.
func (a *Plugin) waitTaker() {
	t := a.taker
	t.mu.Lock()
	defer t.mu.Unlock()
	for upTo := t.woken; t.served < upTo; {
		select {
		case <-t.done:
			return
		default:
		}
		t.cond.Wait()
	}
}

// stopTaker stops the taker once its current take is done.
func (a *Plugin) stopTaker() {
	t := a.taker
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
	t.mu.Lock()
	t.cond.Broadcast() // a waitTaker still waiting sees done
	t.mu.Unlock()
}

// take takes node, or makes it the pending layout if a running container would have to move.
// It writes node down (layoutChanged) before it is in force, with no agent lock held; then
// takes it unless something now blocks it (a Synchronize rebuilt the state meanwhile), in
// which case the layout in force is written down again. The caller holds layoutMu.
func (a *Plugin) take(node *plan.Node, since time.Time) (bool, error) {
	a.reconf.Lock()
	a.mu.Lock()
	_, blocking := a.blockers(node)
	if len(blocking) > 0 {
		err := a.pend(node, since, blocking)
		a.mu.Unlock()
		a.reconf.Unlock()
		return false, err
	}
	a.taking = node
	a.mu.Unlock()
	a.reconf.Unlock()

	a.layoutChanged(node)

	a.reconf.Lock()
	a.mu.Lock()
	next, blocking := a.blockers(node) // a Synchronize may have rebuilt the state meanwhile
	var err error
	taken := len(blocking) == 0
	if taken {
		a.pending = nil
		a.persistDiff(a.state.Allocations(), next.Allocations())
		a.node.Store(node)
		a.state = next
	} else {
		err = a.pend(node, since, blocking)
	}
	a.taking = nil
	cur := a.node.Load()
	a.mu.Unlock()
	a.reconf.Unlock()
	if !taken {
		a.layoutChanged(cur)
	}
	return taken, err
}

// fitsTaking refuses an allocation that a layout being written down (take) would find
// blocking: the container must run as it would under that layout too. The caller holds mu
// and has added the allocation of key c to the state.
func (a *Plugin) fitsTaking(c plan.Container) error {
	if a.taking == nil {
		return nil
	}
	_, blocking := a.blockers(a.taking)
	b, ok := blocking[c.Key()]
	if !ok {
		return nil
	}
	return fmt.Errorf("new pool config %s is being taken and this container would keep it from being taken (%s): "+
		"created again, it is placed by the new config", filepath.Base(a.taking.Pools.Source), b.Reason)
}
