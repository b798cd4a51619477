package checkpoint

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestWriteBatch: a batch writes and removes records as Put and Delete do, and a record
// Load would refuse fails alone.
func TestWriteBatch(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := allocation.Allocation{PodUID: "u1", Container: "a", Pool: "exclusive_a", Type: allocation.TypeExclusive, CPUs: cpuset.New(2, 3)}
	b := allocation.Allocation{PodUID: "u2", Container: "b", Pool: "default", Type: allocation.TypeDefault}
	if err := s.Put(b); err != nil {
		t.Fatal(err)
	}
	bad := allocation.Allocation{PodUID: "u3", Container: strings.Repeat("x", 300), Pool: "default", Type: allocation.TypeDefault}
	err = s.WriteBatch([]allocation.Allocation{a, bad}, []allocation.Key{b.Key(), {PodUID: "gone", Container: "c"}})
	if err == nil || !strings.Contains(err.Error(), "file name is") || strings.Contains(err.Error(), "gone") {
		t.Fatalf("WriteBatch err = %v, want only the bad record's", err)
	}
	recs, err := s.Load()
	if err != nil || len(recs) != 1 || recs[0].Key() != a.Key() || !recs[0].CPUs.Equals(a.CPUs) {
		t.Fatalf("after the batch: %+v, %v; want record u1/a alone", recs, err)
	}
}
