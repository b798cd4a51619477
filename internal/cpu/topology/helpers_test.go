package topology_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// fixture returns the path of a sysfs fixture tree under testdata/sysfs.
func fixture(name string) string { return filepath.Join("testdata", "sysfs", name) }

// procFixture returns the path of the procfs fixture (cmdline) of a sysfs fixture.
func procFixture(name string) string { return filepath.Join("testdata", "procfs", name) }

// copyFixture copies a fixture tree into a fresh temp dir, for tests that change it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(fixture(name))); err != nil {
		t.Fatal(err)
	}
	return root
}

// mustParseCPUSet parses a CPU list or fails the test.
func mustParseCPUSet(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := topology.ParseCPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// copyTree copies the files named (those that exist) from directory src to dst (created).
func copyTree(t *testing.T, src, dst string, names ...string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(src, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, n), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// readFile returns a file's content or fails the test.
func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
