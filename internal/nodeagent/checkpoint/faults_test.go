package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// TestWriteAtomicFailureLeavesNoTempFile: a replace that fails (here the target is a
// non-empty directory) returns the rename's error and leaves no temp file behind.
func TestWriteAtomicFailureLeavesNoTempFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "VERSION", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, "VERSION", []byte("1\n")); err == nil {
		t.Fatal("writeAtomic over a non-empty directory succeeded")
	}
	tmps, err := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix))
	if err != nil || len(tmps) != 0 {
		t.Errorf("temp files left: %v (%v)", tmps, err)
	}
}

// TestSyncDirMissing: the directory's own error (it does not exist), not a later one.
func TestSyncDirMissing(t *testing.T) {
	if err := syncDir(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("syncDir of a missing directory: %v, want not exist", err)
	}
}
