package regfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fifo makes a named pipe in a temporary directory. Nothing ever opens its write end: a
// blocking open of it for reading would never return (and the test would hang).
func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "grant.json")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRefusesFIFO(t *testing.T) {
	p := fifo(t)
	for name, read := range map[string]func() error{
		"Open":        func() error { f, err := Open(p); f.Close(); return err },
		"ReadFile":    func() error { _, err := ReadFile(p); return err },
		"ReadFileMax": func() error { _, err := ReadFileMax(p, 10); return err },
	} {
		err := read()
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "a named pipe") {
			t.Errorf("%s of a FIFO: %v, want %v naming %s and a named pipe", name, err, ErrNotRegular, p)
		}
	}
}

func TestRefusesDirectoryAndDevice(t *testing.T) {
	dir := t.TempDir()
	for path, what := range map[string]string{dir: "a directory", "/dev/null": "a character device"} {
		if _, err := ReadFile(path); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), what) {
			t.Errorf("ReadFile(%s) = %v, want %v (%s)", path, err, ErrNotRegular, what)
		}
	}
}

func TestReadsRegularFilesAndLinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yaml")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml") // as a ConfigMap volume's files are
	if err := os.Symlink("a.yaml", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		max  int64
		want string
	}{{p, -1, "0123456789"}, {link, -1, "0123456789"}, {p, 4, "01234"}, {p, 10, "0123456789"}} {
		if b, err := ReadFileMax(tc.path, tc.max); err != nil || string(b) != tc.want {
			t.Errorf("ReadFileMax(%s, %d) = %q, %v; want %q", tc.path, tc.max, b, err, tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadX509KeyPairRefusesFIFO(t *testing.T) {
	p := fifo(t)
	if _, err := LoadX509KeyPair(p, p); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
		t.Errorf("LoadX509KeyPair of a FIFO: %v, want %v naming %s", err, ErrNotRegular, p)
	}
}
