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

// blockJournal puts a non-empty directory where the journal goes: neither open(2) for writing
// nor rename(2) over it succeeds, even for root (which file modes do not stop).
func blockJournal(t *testing.T, s *Store) string {
	t.Helper()
	path := filepath.Join(s.Dir(), JournalFile)
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWritesSurfaceErrors: a journal that cannot be written is an error naming the
// container (Put, Delete) or the batch, with the cause; nothing is counted as written.
func TestWritesSurfaceErrors(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	path := blockJournal(t, s)
	a := shared(uid1, "app", "shared_b", 100)
	cause := "open " + path + ": is a directory"
	if err := s.Put(a); err == nil || err.Error() != `checkpoint container "app" of pod "`+uid1+`": `+cause {
		t.Errorf("Put error = %v", err)
	}
	if err := s.Delete(a.Key()); err == nil || err.Error() != `delete checkpoint of container "app" of pod "`+uid1+`": `+cause {
		t.Errorf("Delete error = %v", err)
	}
	if err := s.WriteBatch([]allocation.Allocation{a}, []allocation.Key{{PodUID: uid2, Container: "x"}}); err == nil ||
		err.Error() != "checkpoint batch of 2 changes: "+cause {
		t.Errorf("WriteBatch error = %v", err)
	}
	if s.lines != 0 {
		t.Errorf("%d lines counted as written, want 0", s.lines)
	}
	if _, err := s.Load(); err == nil || !strings.HasPrefix(err.Error(), "load checkpoint "+s.Dir()+": ") {
		t.Errorf("Load of a directory as journal: %v", err)
	}
}

// TestWriteToRemovedDirectory: with the checkpoint directory gone (unwritable, whoever runs
// the test), Put and WriteBatch fail; an empty batch writes nothing and so fails nowhere;
// Load reports the directory.
func TestWriteToRemovedDirectory(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "ckpt"))
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	a := shared(uid1, "app", "shared_b", 100)
	if err := s.Put(a); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Put error = %v, want the journal's open error", err)
	}
	if err := s.WriteBatch([]allocation.Allocation{a}, nil); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteBatch error = %v, want the journal's open error", err)
	}
	if err := s.WriteBatch(nil, nil); err != nil {
		t.Errorf("empty WriteBatch: %v", err)
	}
	if _, err := s.Load(); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load error = %v, want the directory's", err)
	}
}

// TestOpenSurfacesErrors: Open reports a directory it cannot create, a VERSION it cannot
// read and a VERSION it cannot write, each with what failed.
func TestOpenSurfacesErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	if _, err := Open(filepath.Join(file, "ckpt")); err == nil ||
		err.Error() != "create checkpoint directory: mkdir "+file+": not a directory" {
		t.Errorf("Open under a file: %v", err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, versionFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || err.Error() != "read checkpoint version: open "+dir+"/VERSION: not a regular file (a directory): refused" {
		t.Errorf("Open with VERSION a directory: %v", err)
	}
	// procfs: an existing directory without VERSION in which no file can be created.
	if fi, err := os.Stat("/proc/self/fdinfo"); err != nil || !fi.IsDir() {
		t.Skip("no /proc")
	}
	_, err := Open("/proc/self/fdinfo")
	if err == nil || !strings.HasPrefix(err.Error(), "create checkpoint version file: open /proc/self/fdinfo/VERSION.") {
		t.Errorf("Open of a directory that takes no files: %v", err)
	}
}
