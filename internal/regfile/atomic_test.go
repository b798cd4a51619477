package regfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"one\n", "two\n"} {
		if err := WriteAtomic(dir, "f", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != v {
			t.Errorf("after writing %q: %q, %v", v, b, err)
		}
	}
}

// TestWriteAtomicFailureLeavesNoTempFile: a replace that fails (here the target is a
// non-empty directory) returns the rename's error and leaves no temp file behind.
func TestWriteAtomicFailureLeavesNoTempFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "VERSION", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(dir, "VERSION", []byte("1\n")); err == nil {
		t.Fatal("WriteAtomic over a non-empty directory succeeded")
	}
	tmps, err := filepath.Glob(filepath.Join(dir, "*"+TempSuffix))
	if err != nil || len(tmps) != 0 {
		t.Errorf("temp files left: %v (%v)", tmps, err)
	}
}

// TestSyncDirMissing: the directory's own error (it does not exist), not a later one.
func TestSyncDirMissing(t *testing.T) {
	if err := SyncDir(filepath.Join(t.TempDir(), "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: %v, want not exist", err)
	}
}
