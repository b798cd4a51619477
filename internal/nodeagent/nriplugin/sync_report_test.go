package nriplugin_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// TestSyncReportCounts: the "synchronized" log line counts what the rebuild did with each
// running container (derived from its annotations and cpuset, restored from its checkpoint
// record, adopted from its cpuset, left unmanaged) and the records of containers gone.
func TestSyncReportCounts(t *testing.T) {
	var rn node
	p := rn.pod("p", poolReq(`{"app": {"exclusive_a": 1}}`))
	rn.run(p, "app", "2", 0, 0)                              // derived: exclusive_a, CPU 2
	rn.run(rn.pod("d", nil), "app", "0,8", 0, 0)             // derived: the default pool
	rn.run(rn.pod("r", nil), "app", "4", 0, 0)               // restored: its record says exclusive_b CPU 4
	rn.run(rn.pod("f", nil), "app", "5", 0, 0)               // adopted: exclusive_b CPU 5
	rn.run(rn.pod("u", nil), "app", "0,1", 0, 0)             // unmanaged: spans default and shared_s
	rn.run(rn.pod("b", nil), "app", " ", 0, 0)               // unmanaged: a cpuset that lists no CPU
	rn.run(rn.pod("z", nil), "app", "1,9", 1, 100000)        // unmanaged: a quota that pays for no millicpu
	rn.run(rn.pod("n", nil), "app", "1,6,9", 100000, 100000) // unmanaged: a quota that pays for CPU 6 only
	// Adopted, not derived: its annotation asks one CPU of exclusive_a, it runs on two.
	rn.run(rn.pod("m", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", "3,11", 0, 0)
	// Adopted, not derived: its annotation asks more of shared_s than there is.
	rn.run(rn.pod("o", poolReq(`{"app": {"shared_s": 2001}}`)), "app", "1,9", 100000, 100000)
	store := newMemStore([]allocation.Allocation{
		{PodUID: "uid-r", Namespace: "ns", Pod: "r", Container: "app", Pool: "exclusive_b", Type: allocation.TypeExclusive,
			CPUs: mustCPUs("4")},
		{PodUID: "uid-gone", Namespace: "ns", Pod: "gone", Container: "app", Pool: "exclusive_b", Type: allocation.TypeExclusive,
			CPUs: mustCPUs("6")},
	})
	a, lb := syncedLog(t, newNode(t, testTopology, testPools), store, &rn, nriplugin.Options{})
	want := "containers=10 derived=2 restored=1 adopted=3 unmanaged=4 dropped=1"
	if got := lb.lines(`msg=synchronized`); len(got) != 1 || !strings.Contains(got[0], want) {
		t.Errorf("sync report %q, want %s", got, want)
	}
	checkFull(t, "held", a,
		"uid-d/ns/d/app pool=default type=default cpus= idled= shared=/0",
		"uid-f/ns/f/app pool=exclusive_b type=exclusive cpus=5 idled= shared=/0",
		"uid-m/ns/m/app pool=exclusive_a type=exclusive cpus=3,11 idled= shared=/0",
		"uid-o/ns/o/app pool=shared_s type=shared cpus= idled= shared=shared_s/1000",
		"uid-p/ns/p/app pool=exclusive_a type=exclusive cpus=2 idled= shared=/0",
		"uid-r/ns/r/app pool=exclusive_b type=exclusive cpus=4 idled= shared=/0")
	if got := lb.lines("cannot keep what a running container holds"); len(got) != 0 {
		t.Errorf("conflicts logged: %q", got)
	}
}

// TestRestoredWithoutCPUSet: a container the runtime reports without a cpuset keeps what
// its checkpoint record says (the runtime did not say it runs elsewhere).
func TestRestoredWithoutCPUSet(t *testing.T) {
	var rn node
	rn.run(rn.pod("r", nil), "app", "", 0, 0)
	rec := allocation.Allocation{PodUID: "uid-r", Namespace: "ns", Pod: "r", Container: "app", Pool: "exclusive_b",
		Type: allocation.TypeExclusive, CPUs: mustCPUs("4")}
	a := synced(t, newNode(t, testTopology, testPools), newMemStore([]allocation.Allocation{rec}), &rn)
	checkFull(t, "held", a, "uid-r/ns/r/app pool=exclusive_b type=exclusive cpus=4 idled= shared=/0")
	if _, err := createOn(t, a, rn.pod("q", nil), "c1", "app", exclusiveCPUs("4")); err == nil {
		t.Error("CPU 4, which the restored container holds, handed out")
	}
}

// TestRecordDifferingInOneFieldIsRewritten: a checkpoint record that differs from what the
// runtime shows in any one field is rewritten at Synchronize (and the disagreement logged,
// both sides described); a matching record, or a container without a record, is not.
func TestRecordDifferingInOneFieldIsRewritten(t *testing.T) {
	derived := allocation.Allocation{PodUID: "uid-p", Namespace: "ns", Pod: "p", Container: "app", Pool: "exclusive_a",
		Type: allocation.TypeExclusive, CPUs: mustCPUs("2")}
	shared := allocation.Allocation{PodUID: "uid-s", Namespace: "ns", Pod: "s", Container: "app", Pool: "shared_s",
		Type: allocation.TypeShared, SharedPool: "shared_s", MilliCPU: 500}
	for _, tc := range []struct {
		name string
		base allocation.Allocation
		edit func(*allocation.Allocation)
	}{
		{"namespace", derived, func(al *allocation.Allocation) { al.Namespace = "other" }},
		{"pod", derived, func(al *allocation.Allocation) { al.Pod = "other" }},
		{"pool", derived, func(al *allocation.Allocation) { al.Pool = "exclusive_b" }},
		{"type", derived, func(al *allocation.Allocation) { al.Type = allocation.TypeShared }},
		{"shared pool", derived, func(al *allocation.Allocation) { al.SharedPool = "shared_s" }},
		{"CPUs, as many", derived, func(al *allocation.Allocation) { al.CPUs = mustCPUs("3") }},
		{"idled, as many", derived, func(al *allocation.Allocation) { al.Idled = mustCPUs("10") }},
		{"share", shared, func(al *allocation.Allocation) { al.MilliCPU = 400 }},
		{"same", derived, nil},
		{"none", derived, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rn node
			if tc.base.Pod == "s" {
				rn.run(rn.pod("s", poolReq(`{"app": {"shared_s": 500}}`)), "app", "1,9", 50000, 100000)
			} else {
				rn.run(rn.pod("p", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", "2", 0, 0)
			}
			rec := tc.base
			if tc.edit != nil {
				tc.edit(&rec)
			}
			var recs []allocation.Allocation
			if tc.name != "none" {
				recs = append(recs, rec)
			}
			store := &writeCounter{memStore: newMemStore(recs)}
			a, lb := syncedLog(t, newNode(t, testTopology, testPools), store, &rn, nriplugin.Options{})
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			got, _ := store.Load()
			if want := full([]allocation.Allocation{tc.base}); !slices.Equal(full(got), want) {
				t.Errorf("checkpoint %q, want %q", full(got), want)
			}
			disagree := lb.lines("checkpoint record disagrees with the runtime")
			differs := tc.edit != nil
			written := differs || tc.name == "none"
			if puts, _ := store.counts(); written != (puts == 1) || puts > 1 || differs != (len(disagree) == 1) {
				t.Errorf("%d records written, disagreement logged %q; want a write: %v, a log line: %v", puts, disagree, written, differs)
			}
			if tc.name == "share" && (len(disagree) != 1 || !strings.Contains(disagree[0], "shared_s=400m") ||
				!strings.Contains(disagree[0], "shared_s=500m")) {
				t.Errorf("disagreement %q does not describe both shares", disagree)
			}
		})
	}
}

// writeCounter is a checkpoint in memory that counts the writes reaching it.
type writeCounter struct {
	*memStore
	mu         sync.Mutex
	puts, dels int
}

func (w *writeCounter) Put(a allocation.Allocation) error {
	w.mu.Lock()
	w.puts++
	w.mu.Unlock()
	return w.memStore.Put(a)
}

func (w *writeCounter) Delete(k allocation.Key) error {
	w.mu.Lock()
	w.dels++
	w.mu.Unlock()
	return w.memStore.Delete(k)
}

func (w *writeCounter) counts() (puts, dels int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.puts, w.dels
}

// TestDefaultContainerWritesNoRecord: a default-pool container costs no checkpoint write at
// create nor at release; an exclusive one costs one each.
func TestDefaultContainerWritesNoRecord(t *testing.T) {
	var rn node
	store := &writeCounter{memStore: newMemStore(nil)}
	a := synced(t, newNode(t, testTopology, testPools), store, &rn)
	pod := rn.pod("d", nil)
	ctr := &api.Container{Id: "c1", PodSandboxId: pod.Id, Name: "app"}
	if _, _, err := a.CreateContainer(t.Context(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StopContainer(t.Context(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveContainer(t.Context(), pod, ctr); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if puts, dels := store.counts(); puts != 0 || dels != 0 {
		t.Errorf("a default-pool container cost %d puts and %d deletes; want none", puts, dels)
	}
	ex := rn.pod("x", poolReq(`{"app": {"exclusive_a": 1}}`))
	xc := &api.Container{Id: "c2", PodSandboxId: ex.Id, Name: "app"}
	if _, _, err := a.CreateContainer(t.Context(), ex, xc); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StopContainer(t.Context(), ex, xc); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if puts, dels := store.counts(); puts != 1 || dels != 1 {
		t.Errorf("an exclusive container cost %d puts and %d deletes; want 1 and 1", puts, dels)
	}
}

// TestCreateAgainKeepsCPUs: the runtime asking again to create the same container instance
// (same ID) gets the CPUs it was given, not others freed meanwhile.
func TestCreateAgainKeepsCPUs(t *testing.T) {
	var rn node
	a := synced(t, newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, &rn)
	first := rn.pod("first", poolReq(`{"app": {"exclusive_a": 1}}`))
	second := rn.pod("second", poolReq(`{"app": {"exclusive_a": 1}}`))
	c1, err := createOn(t, a, first, "c1", "app", nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := createOn(t, a, second, "c2", "app", nil)
	if err != nil || c2 == c1 {
		t.Fatalf("second container: %q, %v; want CPUs other than %s", c2, err, c1)
	}
	if _, err := a.StopContainer(t.Context(), first, &api.Container{Id: "c1", PodSandboxId: first.Id, Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if again, err := createOn(t, a, second, "c2", "app", nil); err != nil || again != c2 {
		t.Errorf("c2 created again: %q, %v; want its CPUs %s", again, err, c2)
	}
}

// failingLoad is a checkpoint that cannot be read.
type failingLoad struct{ nritest.NoCheckpoint }

func (failingLoad) Load() ([]allocation.Allocation, error) { return nil, errors.New("disk on fire") }

// TestUnreadableCheckpointLogged: a checkpoint that cannot be read is logged, and the
// state is rebuilt from the runtime alone; a readable one logs nothing of the kind.
func TestUnreadableCheckpointLogged(t *testing.T) {
	var rn node
	rn.run(rn.pod("p", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", "2", 0, 0)
	a, lb := syncedLog(t, newNode(t, testTopology, testPools), failingLoad{}, &rn, nriplugin.Options{})
	if got := lb.lines("checkpoint unreadable", "disk on fire"); len(got) != 1 {
		t.Errorf("unreadable checkpoint logged %q; want one line", got)
	}
	checkFull(t, "held", a, "uid-p/ns/p/app pool=exclusive_a type=exclusive cpus=2 idled= shared=/0")
	_, lb = syncedLog(t, newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, &rn, nriplugin.Options{})
	if got := lb.lines("checkpoint unreadable"); len(got) != 0 {
		t.Errorf("a readable checkpoint logged %q", got)
	}
}
