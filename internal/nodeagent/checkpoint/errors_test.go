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

// blockRecord puts a non-empty directory where k's record file goes: neither rename(2) over
// it nor remove(2) of it succeeds, even for root (which file modes do not stop).
func blockRecord(t *testing.T, s *Store, k allocation.Key) string {
	t.Helper()
	path := filepath.Join(s.Dir(), fileName(k))
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// tmpFiles lists the temp files left in dir.
func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, dir) {
		if strings.HasSuffix(n, tmpSuffix) {
			out = append(out, n)
		}
	}
	return out
}

// TestDeleteSurfacesErrors: a record that cannot be removed is an error naming the
// container, in Delete and in WriteBatch, and the record stays.
func TestDeleteSurfacesErrors(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	k := allocation.Key{PodUID: uid1, Container: "app"}
	path := blockRecord(t, s, k)
	want := `delete checkpoint of container "app" of pod "` + uid1 + `": remove ` + path + `: directory not empty`
	if err := s.Delete(k); err == nil || err.Error() != want {
		t.Errorf("Delete error = %v, want %s", err, want)
	}
	if err := s.WriteBatch(nil, []allocation.Key{k}); err == nil || err.Error() != want {
		t.Errorf("WriteBatch error = %v, want %s", err, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the record is gone: %v", err)
	}
}

// TestPutSurfacesErrors: a record that cannot be written is an error naming the container;
// the record is not changed and no temp file is left behind.
func TestPutSurfacesErrors(t *testing.T) {
	for _, batch := range []bool{false, true} {
		s := mustOpen(t, t.TempDir())
		a := shared(uid1, "app", "shared_b", 100)
		path := blockRecord(t, s, a.Key())
		put := s.Put
		if batch {
			put = func(a allocation.Allocation) error { return s.WriteBatch([]allocation.Allocation{a}, nil) }
		}
		err := put(a)
		want := `checkpoint container "app" of pod "` + uid1 + `": rename ` + s.Dir() + "/" + fileName(a.Key()) + "."
		// rename(2) over a non-empty directory is EISDIR, EEXIST or ENOTEMPTY, by file system.
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tmpSuffix+" "+path+": ") {
			t.Errorf("batch=%v: error = %v, want %s…tmp %s: …", batch, err, want, path)
		}
		if left := tmpFiles(t, s.Dir()); len(left) != 0 {
			t.Errorf("batch=%v: temp files left behind: %q", batch, left)
		}
	}
}

// TestWriteToRemovedDirectory: with the checkpoint directory gone (unwritable, whoever runs
// the test), a Put fails, and a batch reports each record and the directory sync; an empty
// batch writes nothing and so fails nowhere.
func TestWriteToRemovedDirectory(t *testing.T) {
	s := mustOpen(t, filepath.Join(t.TempDir(), "ckpt"))
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	a := shared(uid1, "app", "shared_b", 100)
	if err := s.Put(a); err == nil || !errors.Is(err, fs.ErrNotExist) ||
		!strings.HasPrefix(err.Error(), `checkpoint container "app" of pod "`+uid1+`": open `+s.Dir()+"/") {
		t.Errorf("Put error = %v, want the temp file's open error", err)
	}
	if err := s.Delete(a.Key()); err != nil {
		t.Errorf("Delete of a record that is not there: %v", err)
	}
	err := s.WriteBatch([]allocation.Allocation{a}, []allocation.Key{{PodUID: uid2, Container: "gone"}})
	if err == nil {
		t.Fatal("WriteBatch into a removed directory succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `checkpoint container "app" of pod "`+uid1+`": open `) ||
		lines[1] != "open "+s.Dir()+": no such file or directory" {
		t.Errorf("WriteBatch error = %q, want the record's error then the directory's", lines)
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
	if _, err := Open(dir); err == nil || err.Error() != "read checkpoint version: read "+dir+"/VERSION: is a directory" {
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
