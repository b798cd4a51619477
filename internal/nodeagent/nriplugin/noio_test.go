package nriplugin_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// gatedStore is a checkpoint on disk whose every call, once stalled, waits until the test
// opens the gate: a disk that does not answer (an fsync storm). Each call that waits is
// named on waiting.
type gatedStore struct {
	*checkpoint.Store
	open    chan struct{}
	waiting chan string

	mu      sync.Mutex
	stalled bool
	opened  sync.Once
}

func newGatedStore(tb testing.TB) *gatedStore {
	return &gatedStore{Store: openStore(tb, tb.TempDir()), open: make(chan struct{}), waiting: make(chan string, 64)}
}

func (g *gatedStore) stall()   { g.mu.Lock(); g.stalled = true; g.mu.Unlock() }
func (g *gatedStore) release() { g.opened.Do(func() { close(g.open) }) }

func (g *gatedStore) wait(op string) {
	g.mu.Lock()
	stalled := g.stalled
	g.mu.Unlock()
	if stalled {
		select {
		case g.waiting <- op:
		default:
		}
		<-g.open
	}
}

func (g *gatedStore) Load() ([]allocation.Allocation, error) { g.wait("Load"); return g.Store.Load() }
func (g *gatedStore) Put(a allocation.Allocation) error      { g.wait("Put"); return g.Store.Put(a) }
func (g *gatedStore) Delete(k allocation.Key) error          { g.wait("Delete"); return g.Store.Delete(k) }
func (g *gatedStore) WriteBatch(puts []allocation.Allocation, dels []allocation.Key) error {
	g.wait("WriteBatch")
	return g.Store.WriteBatch(puts, dels)
}

// returns runs f and fails the whole test binary if it has not returned within d: an f that
// waits for what the test stalled waits for ever (the gate stays shut), so without the bound
// the run would end only at the test timeout.
func returns(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		panic(what + " did not return: it waits for what the test stalled")
	}
}

// TestNoEventWaitsForTheCheckpoint: with the checkpoint's disk stalled from the moment the
// agent exists, the runtime synchronizes it and relays whole lifecycles of exclusive
// containers (whose records are written), and a Shutdown, all answered; the records are
// written once the disk answers again.
func TestNoEventWaitsForTheCheckpoint(t *testing.T) {
	store := newGatedStore(t)
	a := nriplugin.New(newNode(t, testTopology, testPools), store, testLogger(t), nriplugin.Options{})
	store.stall()
	rt := newRuntime(t)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- a.Run(ctx, nriplugin.Connection{Socket: rt.sock, PluginName: "podfence", PluginIndex: "10"})
	}()
	t.Cleanup(func() {
		store.release() // a handler still waiting (on a failure) lets the agent stop
		cancel()
		<-ran
		_ = a.Close()
	})
	returns(t, "the first Synchronize", 10*time.Second, func() { _ = a.WaitSynchronized(context.Background(), 1) })
	rt.nri.BlockPluginSync().Unblock()
	var kept created
	for i := range 3 {
		pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 1}}`))
		c := rt.mustCreate(pod, "app", nil)
		rt.startCtr(c.ctr)
		if i == 2 {
			kept = c
			break
		}
		rt.stopCtr(c.ctr)
		rt.removeCtr(c.ctr)
		rt.removePod(pod)
	}
	returns(t, "Shutdown", 10*time.Second, func() { a.Shutdown(t.Context()) })
	if op := <-store.waiting; op != "WriteBatch" { // the writer holds the records meanwhile
		t.Fatalf("the checkpoint writer is stalled in %s, want WriteBatch", op)
	}
	store.release()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := store.Store.Load()
	if err != nil {
		t.Fatal(err)
	}
	checkHeld(t, "checkpoint", recs, "p:app:"+kept.cpus())
}

// gatedLayouts is an Options.LayoutChanged that names each layout it is given on writing and
// then waits until the test opens the gate: writing the layout in force down to a disk that
// does not answer.
type gatedLayouts struct {
	writing chan *plan.Node
	open    chan struct{}
	once    sync.Once
}

func newGatedLayouts() *gatedLayouts {
	return &gatedLayouts{writing: make(chan *plan.Node, 16), open: make(chan struct{})}
}

func (g *gatedLayouts) changed(n *plan.Node) { g.writing <- n; <-g.open }
func (g *gatedLayouts) release()             { g.once.Do(func() { close(g.open) }) }

// movedPools takes CPU 9 from the shared pool and CPU 8 from the default pool for a new
// exclusive pool exclusive_c: a shared or default container would have to move.
func movedPools() string {
	return strings.NewReplacer(`default:     {cpus: "0,8"}`, `default:     {cpus: "0"}`,
		`shared_s:    {cpus: "1,9"}`, `shared_s:    {cpus: "1"}
  exclusive_c: {cpus: "8-9", hyperThreadingPolicy: multiThreaded}`).Replace(testPools)
}

// TestNoEventWaitsForTheLayoutToBeWrittenDown: the release of a pending pool config's last
// blocker is answered while the new layout is being written down (LayoutChanged does not
// return); meanwhile the old layout stays in force, a container that runs alike under both
// is created and one the new layout would move is refused; once written, the new layout is
// in force.
func TestNoEventWaitsForTheLayoutToBeWrittenDown(t *testing.T) {
	layouts := newGatedLayouts()
	t.Cleanup(layouts.release) // a handler still waiting (on a failure) lets the agent stop
	rt := newRuntime(t)
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), openStore(t, t.TempDir()),
		nriplugin.Options{LayoutChanged: layouts.changed})
	shared := rt.mustCreate(rt.runPod("s", poolReq(`{"app": {"shared_s": 500}}`)), "app", nil)
	if err := ar.Reload(newNode(t, testTopology, movedPools())); !errors.Is(err, nriplugin.ErrPending) {
		t.Fatalf("Reload: %v, want it pending on the shared container", err)
	}
	returns(t, "the removal of the last blocker", 10*time.Second, func() { rt.removeCtr(shared.ctr) })
	if n := <-layouts.writing; !hasPool(n, "exclusive_c") {
		t.Fatalf("layout written down: %s, want the new one", n.Pools.Source)
	}
	if hasPool(ar.Node(), "exclusive_c") {
		t.Fatal("the new layout is in force before it is written down")
	}
	check(t, rt.mustCreate(rt.runPod("x", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", nil),
		want{cpus: "2", mems: "0", exclusive: "2"})
	_, err := rt.create(rt.runPod("y", poolReq(`{"app": {"shared_s": 200}}`)), "app", nil)
	if err == nil || !strings.Contains(err.Error(), "is being taken and this container would keep it from being taken") ||
		!strings.Contains(err.Error(), "runs on CPUs 1,9") {
		t.Fatalf("a shared container created while the layout is written down: %v, want it refused", err)
	}
	layouts.release()
	if err := ar.Flush(); err != nil {
		t.Fatal(err)
	}
	if !hasPool(ar.Node(), "exclusive_c") {
		t.Fatal("the new layout is not in force once written down")
	}
	checkHeld(t, "after the layout was taken", ar.Allocations(), "x:app:2")
}

// TestSynchronizeDoesNotWaitForTheLayoutToBeWrittenDown: an agent restarted with a changed
// pool config that no running container blocks (Options.Next) answers its first Synchronize
// while the new layout is written down (the runtime relays the next container to it), and
// takes it once written.
func TestSynchronizeDoesNotWaitForTheLayoutToBeWrittenDown(t *testing.T) {
	layouts := newGatedLayouts()
	t.Cleanup(layouts.release)
	rt := newRuntime(t)
	a := nriplugin.New(newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, testLogger(t),
		nriplugin.Options{Next: newNode(t, testTopology, movedPools()), LayoutChanged: layouts.changed})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- a.Run(ctx, nriplugin.Connection{Socket: rt.sock, PluginName: "podfence", PluginIndex: "10"})
	}()
	t.Cleanup(func() {
		layouts.release()
		cancel()
		<-ran
		_ = a.Close()
	})
	returns(t, "the first Synchronize", 10*time.Second, func() { _ = a.WaitSynchronized(context.Background(), 1) })
	if n := <-layouts.writing; !hasPool(n, "exclusive_c") {
		t.Fatalf("layout written down: %s, want the new one", n.Pools.Source)
	}
	// The runtime has the agent's answer to Synchronize: it relays the next event to it.
	check(t, rt.mustCreate(rt.runPod("x", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", nil),
		want{cpus: "2", mems: "0", exclusive: "2"})
	layouts.release()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if !hasPool(a.Node(), "exclusive_c") {
		t.Fatal("the new layout is not in force once written down")
	}
}

func hasPool(n *plan.Node, name string) bool { _, ok := n.Pools.Pool(name); return ok }

// stalledKubelet is a kubelet pod resources API that answers no call until the test opens
// the gate (a kubelet busy under load; it ignores the caller's deadline, so a caller that
// waits for it at all waits until then). Each pod's container "app" has one exclusive_b CPU.
type stalledKubelet struct {
	open    chan struct{}
	once    sync.Once
	waiting chan string
}

func newStalledKubelet() *stalledKubelet {
	return &stalledKubelet{open: make(chan struct{}), waiting: make(chan string, 16)}
}

func (k *stalledKubelet) release() { k.once.Do(func() { close(k.open) }) }

func (k *stalledKubelet) Pod(_ context.Context, ref podresources.Ref, _ string) (podresources.Pod, error) {
	k.waiting <- "Pod " + ref.Name
	<-k.open
	return podresources.Pod{"app": podresources.Devices{"podfence.io/exclusive_b": {"5"}}}, nil
}

func (k *stalledKubelet) List(context.Context) (map[podresources.Ref]podresources.Pod, error) {
	k.waiting <- "List"
	<-k.open
	return nil, nil
}

// TestNoEventWaitsForTheKubelet: with the kubelet not answering, a Synchronize (whose List
// is made before the connection: Prepare) and a RunPodSandbox (whose read of the pod's
// devices runs in the background) are answered; the pod's container gets its devices once
// the kubelet answers.
func TestNoEventWaitsForTheKubelet(t *testing.T) {
	kubelet := newStalledKubelet()
	a := nriplugin.New(newNode(t, testTopology, kubeletPools), nritest.NoCheckpoint{}, testLogger(t),
		nriplugin.Options{PodResources: kubelet})
	t.Cleanup(func() {
		kubelet.release() // a handler still waiting (on a failure) returns
		_ = a.Close()
	})
	var rn node
	pod := rn.pod("dp", nil)
	returns(t, "Synchronize", 10*time.Second, func() { _, _ = a.Synchronize(context.Background(), rn.pods, rn.ctrs) })
	returns(t, "RunPodSandbox", 10*time.Second, func() { _ = a.RunPodSandbox(context.Background(), pod) })
	if got := <-kubelet.waiting; got != "Pod dp" {
		t.Fatalf("the kubelet was asked %s, want the pod's devices (in the background)", got)
	}
	kubelet.release()
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := createOn(t, a, pod, "c1", "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != "5" {
		t.Errorf("the container runs on %q, want its kubelet device's CPU 5", got)
	}
}

// TestNoEventWaitsForAGrant: a grant file that cannot be read (a FIFO no one writes: open
// blocks, as a read from a stalled disk does) holds neither the List before a connection,
// nor its Synchronize, nor a CreateContainer naming the claim: that container is refused,
// for the kubelet to create again.
func TestNoEventWaitsForAGrant(t *testing.T) {
	store := grant.Store{Dir: t.TempDir()}
	if err := syscall.Mkfifo(filepath.Join(store.Dir, "e-slow.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := nriplugin.New(newNode(t, testTopology, draPools), nritest.NoCheckpoint{}, testLogger(t),
		nriplugin.Options{DRAStateDir: store.Dir})
	t.Cleanup(func() { _ = a.Close() })
	var rn node
	pod := rn.pod("enclave", nil)
	rn.run(pod, "running", "", 0, 0).Env = []string{claimEnv("e-slow")}
	returns(t, "Prepare", 10*time.Second, func() { a.Prepare(context.Background()) })
	returns(t, "Synchronize", 10*time.Second, func() { _, _ = a.Synchronize(context.Background(), rn.pods, rn.ctrs) })
	var err error
	returns(t, "CreateContainer", 10*time.Second, func() {
		_, _, err = a.CreateContainer(context.Background(), pod, &api.Container{Id: "c2", PodSandboxId: pod.Id, Name: "app",
			Env: []string{claimEnv("e-slow")}})
	})
	// A FIFO is refused at once (regfile: opened without blocking, not a regular file); a grant
	// that reads too slowly is refused after 100 ms. Either way the event returns, refused.
	if err == nil || !strings.Contains(err.Error(), "DRA claim e-slow: ") || !strings.Contains(err.Error(), "not a regular file") &&
		!strings.Contains(err.Error(), "within 100ms (the disk is slow)") {
		t.Errorf("CreateContainer naming a claim whose grant does not read: %v, want it refused", err)
	}
}
