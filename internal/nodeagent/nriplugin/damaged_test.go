package nriplugin_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// TestDamagedCheckpointRecords: records that do not fit the runtime or each other (idled
// siblings that another container runs on, negative or oversized millicpu) are dropped and
// rebuilt from the runtime; no CPU or millicpu is counted twice or lost.
func TestDamagedCheckpointRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(map[string]allocation.Allocation)
	}{
		{"idled lists another container's CPUs", func(r map[string]allocation.Allocation) {
			a := r["a"]
			a.Idled = cpuset.New(3, 10, 11)
			r["a"] = a
		}},
		{"negative milliCPU", func(r map[string]allocation.Allocation) {
			s := r["s"]
			s.MilliCPU = -96500
			r["s"] = s
		}},
		{"milliCPU of the whole pool", func(r map[string]allocation.Allocation) {
			s := r["s"]
			s.MilliCPU = 2000
			r["s"] = s
		}},
		{"foreign container's record with negative milliCPU", func(r map[string]allocation.Allocation) {
			f := r["f"]
			f.MilliCPU = -5
			r["f"] = f
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t)
			node := newNode(t, testTopology, testPoolsST)
			dir := t.TempDir()
			first := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
			a := rt.mustCreate(rt.runPod("a", poolReq(`{"c": {"exclusive_a": 1}}`)), "c", nil) // 2, idles 10
			rt.mustCreate(rt.runPod("b", poolReq(`{"c": {"exclusive_a": 1}}`)), "c", nil)      // 3, idles 11
			rt.mustCreate(rt.runPod("s", poolReq(`{"c": {"shared_s": 300}}`)), "c", nil)
			rt.addRunning(rt.addPod("f"), "c", "1,9", 20000) // not podfence's: a 200 millicpu share
			first.stop()
			first = startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{}) // adopts f
			reference := full(first.Allocations())
			if err := first.Flush(); err != nil {
				t.Fatal(err)
			}
			first.stop()

			store := openStore(t, dir)
			recs, err := store.Load()
			if err != nil || len(recs) != 4 {
				t.Fatalf("checkpoint: %v, %v; want 4 records", held(recs), err)
			}
			byPod := map[string]allocation.Allocation{}
			for _, r := range recs {
				byPod[r.Pod] = r
			}
			tc.damage(byPod)
			for _, r := range byPod {
				if err := store.Put(r); err != nil {
					t.Fatal(err)
				}
			}
			second := startAgent(t, rt, node, store, nriplugin.Options{})
			if got := full(second.Allocations()); !slices.Equal(got, reference) {
				t.Fatalf("after damaged records:\n  %v\nwant\n  %v", got, reference)
			}
			// Exactly 1500 millicpu are free in the shared pool, and exclusive_a has no CPU left.
			if _, err := rt.create(rt.runPod("s2", poolReq(`{"c": {"shared_s": 1501}}`)), "c", nil); err == nil {
				t.Error("1501 millicpu granted; 300+200 of 2000 are held")
			}
			rt.mustCreate(rt.runPod("s3", poolReq(`{"c": {"shared_s": 1500}}`)), "c", nil)
			if _, err := rt.create(rt.runPod("x", poolReq(`{"c": {"exclusive_a": 1}}`)), "c", nil); err == nil {
				t.Error("an exclusive_a CPU handed out while both cores are held")
			}
			rt.removeCtr(a.ctr)
			check(t, rt.mustCreate(rt.runPod("y", poolReq(`{"c": {"exclusive_a": 1}}`)), "c", nil),
				want{cpus: "2", mems: "0", exclusive: "2"})
		})
	}
}

// TestHugeRecordDoesNotStallSync: after a 2.8 MB journal line (a CPU list repeated), which the
// checkpoint refuses unread (checkpoint.TestLongLineUnread measures that), the agent
// starts, keeps the running container and serves the next one.
func TestHugeRecordDoesNotStallSync(t *testing.T) {
	rt := newRuntime(t)
	node := newNode(t, testTopology, testPools)
	dir := t.TempDir()
	first := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	c := rt.mustCreate(rt.runPod("p", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil)
	if err := first.Flush(); err != nil {
		t.Fatal(err)
	}
	first.stop()
	huge := `{"put":{"podUID":"uid-x","container":"app","pool":"exclusive_b","type":"exclusive","cpus":"` +
		strings.Repeat("0-8191,", 400000) + `0"}}` + "\n"
	f, err := os.OpenFile(filepath.Join(dir, checkpoint.JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(huge); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	second := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{}) // fails if not synchronised in time
	checkHeld(t, "after a restart beside a huge record", second.Allocations(), "p:app:"+c.cpus())
	check(t, rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil),
		want{cpus: "5,13", mems: "1", exclusive: "5,13"})
}

// countingStore counts the writes that reach a checkpoint.
type countingStore struct {
	nriplugin.Checkpoint
	mu     sync.Mutex
	writes int
}

func (s *countingStore) Put(a allocation.Allocation) error {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	return s.Checkpoint.Put(a)
}

// TestRestartRewritesNothing: an agent restarted on an intact checkpoint finds every record
// equal to what it rebuilds from the runtime (an empty CPU set read back from a record
// included) and writes nothing.
func TestRestartRewritesNothing(t *testing.T) {
	rt := newRuntime(t)
	node := newNode(t, testTopology, testPoolsST)
	dir := t.TempDir()
	first := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	createAll(t, rt)
	first.stop()
	store := &countingStore{Checkpoint: openStore(t, dir)}
	second := startAgent(t, rt, node, store, nriplugin.Options{})
	if err := second.Flush(); err != nil {
		t.Fatal(err)
	}
	if store.writes != 0 {
		t.Errorf("the restarted agent rewrote %d records that matched the runtime", store.writes)
	}
}
