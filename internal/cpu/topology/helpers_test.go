package topology_test

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// fixture returns the path of a sysfs fixture tree under testdata/sysfs.
func fixture(name string) string { return filepath.Join("testdata", "sysfs", name) }

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
