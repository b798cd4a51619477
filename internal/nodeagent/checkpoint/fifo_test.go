package checkpoint

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const notRegular = "not a regular file (a named pipe)"

// TestRefusesFIFO: a named pipe (nothing writes to it) as the journal, the version file or a
// version 1 record is refused at once with an error naming it: Open, Load and Put do not wait.
func TestRefusesFIFO(t *testing.T) {
	t.Run("journal", func(t *testing.T) {
		s := mustOpen(t, t.TempDir())
		p := filepath.Join(s.Dir(), JournalFile)
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), notRegular) {
			t.Errorf("Load with a FIFO journal: %v, want an error naming %s, %s", err, p, notRegular)
		}
		if err := s.Put(shared(uid1, "a", "shared_b", 1)); err == nil || !strings.Contains(err.Error(), notRegular) {
			t.Errorf("Put with a FIFO journal: %v, want %s", err, notRegular)
		}
	})
	t.Run("version", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, versionFile)
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), notRegular) {
			t.Errorf("Open with a FIFO version file: %v, want an error naming %s, %s", err, p, notRegular)
		}
	})
	t.Run("v1 record", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "record.json")
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadV1Record(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), notRegular) {
			t.Errorf("loadV1Record of a FIFO: %v, want an error naming %s, %s", err, p, notRegular)
		}
	})
}
