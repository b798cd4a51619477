package checkpoint

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestWriteBatchWritesPastABadRecord: a record that cannot be written is reported and the
// batch's other records, after it too, are written.
func TestWriteBatchWritesPastABadRecord(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	bad, good := shared(uid1, "a\xff", "shared_b", 1), shared(uid2, "app", "shared_b", 1)
	if err := s.WriteBatch([]allocation.Allocation{bad, good}, nil); err == nil || !strings.Contains(err.Error(), "valid UTF-8") {
		t.Errorf("WriteBatch error = %v, want the bad record's", err)
	}
	if got := mustLoad(t, s); len(got) != 1 || got[0].Key() != good.Key() {
		t.Errorf("Load() = %+v, want only %v", got, good.Key())
	}
}
