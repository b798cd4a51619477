package nriplugin_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/testwait"
)

// held lists "container:cpus" for every allocation, sorted.
func held(allocs []allocation.Allocation) []string {
	var out []string
	for _, a := range allocs {
		out = append(out, fmt.Sprintf("%s:%s:%s", a.Pod, a.Container, a.CPUs))
	}
	slices.Sort(out)
	return out
}

func checkHeld(t *testing.T, what string, allocs []allocation.Allocation, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := held(allocs); !slices.Equal(got, want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

func TestSynchronizeAdoptsAndRestores(t *testing.T) {
	rt := newRuntime(t)
	node := newNode(t, testTopology, testPools)
	store := openStore(t, t.TempDir())
	known := rt.addPod("known")
	rt.addRunning(known, "app", "6-7", 0)
	gone := allocation.Allocation{PodUID: "uid-gone", Namespace: "ns", Pod: "gone", Container: "app",
		Pool: "exclusive_b", Type: allocation.TypeExclusive, CPUs: cpuset.New(5)}
	for _, a := range []allocation.Allocation{gone, {PodUID: known.Uid, Namespace: "ns", Pod: "known", Container: "app",
		Pool: "exclusive_b", Type: allocation.TypeExclusive, CPUs: cpuset.New(6, 7)}} {
		if err := store.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	foreign := rt.addPod("foreign")
	rt.addRunning(foreign, "excl", "4,12", 0)     // inside exclusive_b: adopted, CPUs held
	rt.addRunning(foreign, "share", "1,9", 30000) // the shared pool with a quota: 300 millicpu held
	rt.addRunning(foreign, "plain", "0,8", 0)     // default pool: managed, holds no CPUs
	rt.addRunning(foreign, "wide", "0-15", 0)     // spans pools: left alone
	// An older agent recorded default-pool containers too: the record goes at the first sync.
	if err := store.Put(allocation.Allocation{PodUID: foreign.Uid, Namespace: "ns", Pod: "foreign", Container: "plain",
		Pool: "default", Type: allocation.TypeDefault}); err != nil {
		t.Fatal(err)
	}

	ar := startAgent(t, rt, node, store, nriplugin.Options{})
	checkHeld(t, "after sync", ar.Allocations(), "known:app:6-7", "foreign:excl:4,12", "foreign:share:", "foreign:plain:")
	if err := ar.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	// The default-pool container holds nothing and is derived from the runtime: no record.
	checkHeld(t, "checkpoint after sync", recs, "known:app:6-7", "foreign:excl:4,12", "foreign:share:")

	// Free in exclusive_b: 5,13-15 only.
	check(t, rt.mustCreate(rt.runPod("new", poolReq(`{"app": {"exclusive_b": 4}}`)), "app", nil),
		want{cpus: "5,13-15", mems: "1", exclusive: "5,13,14,15"})
	if _, err := rt.create(rt.runPod("full", poolReq(`{"app": {"shared_s": 1701}}`)), "app", nil); err == nil {
		t.Error("shared pool has 1700 millicpu left, but a 1701 share was granted")
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.syncUpd) > 0 {
		t.Errorf("Synchronize moved running containers: %v", rt.syncUpd)
	}
}

func TestSynchronizeAdoptsWhereRecordDisagrees(t *testing.T) {
	rt := newRuntime(t)
	store := openStore(t, t.TempDir())
	pod := rt.addPod("p")
	rt.addRunning(pod, "app", "5", 0)
	if err := store.Put(allocation.Allocation{PodUID: pod.Uid, Namespace: "ns", Pod: "p", Container: "app",
		Pool: "exclusive_b", Type: allocation.TypeExclusive, CPUs: cpuset.New(6)}); err != nil {
		t.Fatal(err)
	}
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), store, nriplugin.Options{})
	checkHeld(t, "the runtime's cpuset wins", ar.Allocations(), "p:app:5")
}

func TestAgentRestartBetweenCreateAndRemove(t *testing.T) {
	rt := newRuntime(t)
	node := newNode(t, testTopology, testPools)
	dir := t.TempDir()
	first := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	c := rt.mustCreate(rt.runPod("p", poolReq(`{"app": {"exclusive_a": 4}}`)), "app", nil)
	first.stop()

	second := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	checkHeld(t, "after restart", second.Allocations(), "p:app:2-3,10-11")
	if _, err := rt.create(rt.runPod("q", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", nil); err == nil {
		t.Fatal("restarted agent gave out CPUs a running container holds")
	}
	rt.removeCtr(c.ctr)
	checkHeld(t, "after remove", second.Allocations())
	if err := second.Flush(); err != nil {
		t.Fatal(err)
	}
	if recs, _ := openStore(t, dir).Load(); len(recs) != 0 {
		t.Errorf("checkpoint still holds %v after remove", held(recs))
	}
	check(t, rt.mustCreate(rt.runPod("r", poolReq(`{"app": {"exclusive_a": 4}}`)), "app", nil),
		want{cpus: "2-3,10-11", mems: "0", exclusive: "2,3,10,11"})
}

func TestReconnectAfterRuntimeRestart(t *testing.T) {
	rt := newRuntime(t)
	rt.stop()
	rt.kill = true
	rt.start()
	failed := make(chan struct{}, 64)
	log := slog.New(onMessage{Handler: testLogger(t).Handler(), msg: "cannot connect to runtime", ch: failed})
	ar := startAgentLog(t, rt, newNode(t, testTopology, testPools), openStore(t, t.TempDir()), nriplugin.Options{}, log)
	a := rt.mustCreate(rt.runPod("a", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil)
	rt.stop()
	for range 2 { // the agent tried and failed while the runtime was away
		testwait.Receive(t, failed, "the agent to try to reconnect")
	}
	rt.start()
	ar.waitSync(t, rt, 2)
	checkHeld(t, "after reconnect", ar.Allocations(), "a:app:"+a.cpus())
	check(t, rt.mustCreate(rt.runPod("b", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil),
		want{cpus: "5,13", mems: "1", exclusive: "5,13"})
}

// panicky panics for containers named "boom", as a buggy dependency would.
type panicky struct{}

func (panicky) Name() string { return "panicky" }

func (panicky) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container,
	_ plan.Decision) (*api.ContainerAdjustment, error) {
	if ctr.Name == "boom" {
		panic("wrapper bug")
	}
	frag := &api.ContainerAdjustment{}
	frag.SetArgs([]string{"/podfence/start", "--", "app"})
	return frag, nil
}

func TestPanicFailsOneContainer(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{Extensions: []nriplugin.Extension{panicky{}}})
	pod := rt.runPod("p", poolReq(`{"boom": {"exclusive_a": 4}, "app": {"exclusive_a": 4}}`))
	_, err := rt.create(pod, "boom", nil)
	if err == nil || !strings.Contains(err.Error(), "CreateContainer: internal error: wrapper bug") {
		t.Fatalf("error %v, want the recovered panic", err)
	}
	c := rt.mustCreate(pod, "app", nil) // boom's CPUs were released
	check(t, c, want{cpus: "2-3,10-11", mems: "0", exclusive: "2,3,10,11"})
	if !slices.Equal(c.adjust.GetArgs(), []string{"/podfence/start", "--", "app"}) {
		t.Errorf("args %q, want the wrapper's", c.adjust.GetArgs())
	}
	checkHeld(t, "after panic", ar.Allocations(), "p:app:2-3,10-11")
}

// slowStore blocks every write until release is closed, like a stalled disk.
type slowStore struct {
	nriplugin.Checkpoint
	release chan struct{}
}

func (s slowStore) Put(a allocation.Allocation) error { <-s.release; return s.Checkpoint.Put(a) }
func (s slowStore) Delete(k allocation.Key) error     { <-s.release; return s.Checkpoint.Delete(k) }

func TestCheckpointOffTheHotPath(t *testing.T) {
	rt := newRuntime(t)
	disk := openStore(t, t.TempDir())
	slow := slowStore{Checkpoint: disk, release: make(chan struct{})}
	ar := startAgent(t, rt, newNode(t, testTopology, testPools), slow, nriplugin.Options{})
	for i := range 3 {
		rt.mustCreate(rt.runPod(fmt.Sprint("p", i), poolReq(`{"app": {"exclusive_b": 1}}`)), "app", nil)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- ar.Flush() }()
	// Flush waiting, not a pause, shows it did not return while the store was blocked.
	testwait.Eventually(t, "Flush to wait for the store, or return", func() bool {
		return len(flushed) > 0 || testwait.Waiting("nriplugin.(*Plugin).Flush(")
	})
	if len(flushed) > 0 {
		t.Fatal("Flush returned while the store was blocked")
	}
	close(slow.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if recs, _ := disk.Load(); len(recs) != 3 {
		t.Errorf("checkpoint holds %v, want 3 records", held(recs))
	}
}

// TestConcurrentHandlers calls the handlers from many goroutines, as NRI may (run with -race).
func TestConcurrentHandlers(t *testing.T) {
	ar := nriplugin.New(newNode(t, testTopology, testPools), openStore(t, t.TempDir()), testLogger(t), nriplugin.Options{})
	defer ar.Close()
	type pc struct {
		pod *api.PodSandbox
		ctr *api.Container
	}
	var all []pc
	for i := range 8 { // exclusive_b has 8 CPUs
		pod := &api.PodSandbox{Id: fmt.Sprint("pod", i), Uid: fmt.Sprint("uid", i), Namespace: "ns", Name: fmt.Sprint("p", i),
			Annotations: poolReq(`{"app": {"exclusive_b": 1}}`)}
		all = append(all, pc{pod, &api.Container{Id: fmt.Sprint("ctr", i), PodSandboxId: pod.Id, Name: "app"}})
	}
	got := make([]string, len(all))
	var wg sync.WaitGroup
	for i, x := range all {
		wg.Go(func() {
			adj, _, err := ar.CreateContainer(t.Context(), x.pod, x.ctr)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = adj.GetLinux().GetResources().GetCpu().GetCpus()
			if _, err := ar.UpdateContainer(t.Context(), x.pod, x.ctr, &api.LinuxResources{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if distinct := slices.Compact(slices.Sorted(slices.Values(got))); len(distinct) != len(all) {
		t.Errorf("CPUs handed out twice: %v", got)
	}
	for _, x := range all {
		wg.Go(func() {
			if _, err := ar.StopContainer(t.Context(), x.pod, x.ctr); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	checkHeld(t, "after concurrent stops", ar.Allocations())
}

func TestRunRefusesBadPluginIndex(t *testing.T) {
	ar := nriplugin.New(newNode(t, testTopology, testPools), openStore(t, t.TempDir()), testLogger(t), nriplugin.Options{})
	defer ar.Close()
	err := ar.Run(t.Context(), nriplugin.Connection{Socket: "/nonexistent", PluginName: "podfence", PluginIndex: "1"})
	if err == nil || !strings.Contains(err.Error(), `invalid plugin index "1", must be 2 digits`) {
		t.Errorf("error %v, want the bad index named", err)
	}
}

// onMessage is a log handler that also signals ch for each record whose message is msg.
type onMessage struct {
	slog.Handler
	msg string
	ch  chan struct{}
}

func (h onMessage) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h onMessage) WithAttrs(as []slog.Attr) slog.Handler {
	return onMessage{Handler: h.Handler.WithAttrs(as), msg: h.msg, ch: h.ch}
}

func (h onMessage) WithGroup(name string) slog.Handler {
	return onMessage{Handler: h.Handler.WithGroup(name), msg: h.msg, ch: h.ch}
}
