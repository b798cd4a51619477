// Package nri is podfence's node agent as an NRI plugin (https://github.com/containerd/nri):
// the runtime (containerd, CRI-O) calls it while it creates each container, and the agent
// answers with the container's CPU pool settings, applied before the container's first
// instruction.
//
// Per event:
//   - Synchronize: rebuild the state from the runtime's containers and the checkpoint;
//     containers keep the CPUs they run on, and none is ever updated.
//   - CreateContainer: plan the container (see podapi.AnnotationCPUPools, podapi.AnnotationExclusiveCPUs,
//     and for pods without the first, the kubelet's devices: kubelet.go; the DRA claims its environment names: claims.go) and return cpuset.cpus, cpuset.mems, the CFS quota/period of a shared-pool share, and
//     EXCLUSIVE_CPUS / SHARED_CPUS.
//   - UpdateContainer: a resource update that would change what podfence set is answered
//     with podfence's values.
//   - StopContainer, RemoveContainer, RemovePodSandbox: release (a native sidecar keeps what
//     it holds at StopContainer, for its next instance).
//
// Handlers do bounded in-memory work under one mutex and wait on no disk or API: the checkpoint
// is read by New and written by one background goroutine (persist.go), a new layout is written
// down by another (layout.go), and what Synchronize needs from outside is read before each
// connection (Prepare). The calls out left, to the kubelet for a pod's devices and to the DRA
// grant store, are made from memory when they can, else outside the mutex and bounded.
package nriplugin

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
)

// Checkpoint persists allocations across agent restarts; *checkpoint.Store is one.
type Checkpoint interface {
	Put(allocation.Allocation) error
	Delete(allocation.Key) error
	Load() ([]allocation.Allocation, error)
}

// Options are the agent's optional parts.
type Options struct {
	// Extensions ride on the agent's events, in this order (see Extension).
	Extensions []Extension
	// LayoutChanged, if set, writes down the layout in force: it is called with each new
	// layout (Reload, or a pending one once nothing blocks it) before the agent answers any
	// container by it, and again with the old one if the new one was found blocked then
	// (layout.go); one call at a time, outside the agent's locks and never in an NRI event.
	LayoutChanged func(*plan.Node)
	// Next, if set, is a layout to switch to after the first Synchronize, as Reload does: the
	// pool config read at start when the layout last in force (the one the running
	// containers were placed by, New's node) differs from it.
	Next *plan.Node
	// PodResources, if set, is the kubelet's pod resources API: containers of pods without a
	// pool request annotation get the pools of their devices there (kubelet.go), each call
	// bounded by PodResourcesTimeout (0: DefaultPodResourcesTimeout).
	PodResources        PodResources
	PodResourcesTimeout time.Duration
	// DRAStateDir is the DRA driver's grant store (package dra/grant): a container whose
	// environment names a DRA claim gets what the claim's grant there gives it (claims.go).
	// Empty: such a container is refused.
	DRAStateDir string
}

// Plugin is the NRI plugin: it decides each container's CPUs and keeps the ledger of what is
// handed out. Create it with New and connect it with Run.
type Plugin struct {
	node     atomic.Pointer[plan.Node] // swapped whole by Reload
	layoutMu sync.Mutex                // serialises layout changes and their writing down (layout.go); before reconf
	reconf   sync.Mutex                // serialises Synchronize and Reload
	taker    *taker                    // takes pending layouts in the background (layout.go)
	log      *slog.Logger
	exts     []Extension
	persist  *persister
	onLayout func(*plan.Node)
	next     *plan.Node              // Options.Next until the first Synchronize
	kubelet  *kubeletDevices         // nil without Options.PodResources
	grants   *grantReads             // nil without Options.DRAStateDir
	poolReqs poolRequests            // parsed podfence.io/cpu-pools values (poolreqs.go)
	loaded   []allocation.Allocation // the checkpoint's records, for the first Synchronize
	loadErr  error

	// mu guards everything below. Invariant: every key in hold holds an allocation in state.
	mu       sync.Mutex
	state    *plan.Ledger
	hold     *holders      // the container instances holding allocations
	pending  *pending      // a layout waiting for containers to end (see Reload)
	retryDue bool          // pending has no blocker left: wake the taker
	taking   *plan.Node    // a layout being written down (layout.go)
	syncs    int           // completed Synchronize calls
	syncC    chan struct{} // closed and replaced at each Synchronize
}

// New returns an agent for node that records its allocations in cp. It reads cp's records
// (for the first Synchronize, which must not wait for the disk) and starts the checkpoint
// writer; Close stops it.
func New(node *plan.Node, cp Checkpoint, log *slog.Logger, opts Options) *Plugin {
	recs, lerr := cp.Load()
	a := &Plugin{
		loaded:   recs,
		loadErr:  lerr,
		log:      log,
		exts:     opts.Extensions,
		onLayout: opts.LayoutChanged,
		next:     opts.Next,
		kubelet:  newKubeletDevices(opts.PodResources, opts.PodResourcesTimeout),
		grants:   newGrantReads(opts.DRAStateDir),
		persist:  newPersister(cp, log),
		state:    plan.NewLedger(node),
		hold:     newHolders(),
		syncC:    make(chan struct{}),
	}
	a.node.Store(node)
	a.startTaker()
	return a
}

// Flush waits for the agent's background work: the kubelet reads RunPodSandbox started, a
// pending layout whose last blocker was released (taken, or found blocked again), and the
// checkpoint writes of every allocation change made so far; it returns the write errors
// since the previous Flush.
func (a *Plugin) Flush() error {
	a.kubelet.wait()
	a.waitTaker()
	return a.persist.flush()
}

// Close stops the layout taker, flushes the checkpoint and stops its writer. Call it after
// Run returns.
func (a *Plugin) Close() error {
	a.stopTaker()
	return a.persist.close()
}

// WaitSynchronized waits until the runtime has synchronized the agent at least n times
// (once per connection).
func (a *Plugin) WaitSynchronized(ctx context.Context, n int) error {
	for {
		a.mu.Lock()
		done, c := a.syncs >= n, a.syncC
		a.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-c:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Allocations returns what the agent holds, sorted by key.
func (a *Plugin) Allocations() []allocation.Allocation {
	_, allocs := a.Snapshot()
	return allocs
}

// record adds or replaces the holder of an allocation and queues its checkpoint write.
// The caller holds mu.
func (a *Plugin) record(id, sandbox string, alloc allocation.Allocation, persist bool) {
	a.hold.add(alloc.Key(), id, sandbox)
	if persist && recorded(alloc) {
		a.persist.put(alloc)
	}
}

// recorded says whether al gets a checkpoint record. A default-pool container holds nothing
// and a restart derives it from the runtime alone (no request annotation), so its record
// would only cost a file write at create and a removal at release.
func recorded(al allocation.Allocation) bool { return al.Type != allocation.TypeDefault }

// releaseLocked frees k's allocation and queues the deletion of its record. The caller
// holds mu.
func (a *Plugin) releaseLocked(k allocation.Key) {
	if al, ok := a.state.Get(k); ok && recorded(al) {
		a.persist.del(k)
	}
	a.state.Release(k)
	a.hold.remove(k)
	a.unblocked(k)
}
