package pools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLoadRefusesFIFO: a named pipe (nothing writes to it) named as a pool config, given as
// the path or found in the directory, is refused at once with an error naming it (it was
// read up to MaxConfigBytes before: now nothing that is not a regular file is read).
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "poolconfig-a.yaml"), []byte("pools:\n  default: {cpus: \"0\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "poolconfig-b.yaml")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, dir} {
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
			t.Errorf("Load(%s): %v, want an error naming %s, not a regular file", path, err, p)
		}
	}
}
