package admission

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoadRefusesFIFO: a named pipe (nothing writes to it) as the profile file or the
// webhook's certificate is refused at once with an error naming it.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "coresched-profiles.yaml")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "not a regular file (a named pipe)"
	if _, err := LoadProfiles(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadProfiles of a FIFO: %v, want an error naming %s, %s", err, p, want)
	}
	if _, err := NewCertReloader(p, p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), want) {
		t.Errorf("NewCertReloader of a FIFO: %v, want an error naming %s, %s", err, p, want)
	}
}
