package host_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/host"
)

// TestPlaceGone: processes that exit before or while they are placed are skipped.
func TestPlaceGone(t *testing.T) {
	n, cg := setup(t, "v1", cgroupfsPod)
	if _, err := cg.Create(); err != nil {
		t.Fatal(err)
	}
	if p, err := cg.Place(n.Proc, []int{4242}); err != nil || p != (host.Placement{}) {
		t.Errorf("Place(gone) = %+v, %v", p, err)
	}
}

func TestReadProcs(t *testing.T) {
	proc := t.TempDir()
	for pid, stat := range map[string]string{
		"1":    "1 (init) S 0 1 1 0 -1",
		"42":   "42 (a) (b)) S 1 42 42 0 -1",
		"7":    "7 (containerd-shim) S 1 7 7 0",
		"self": "not a process",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := host.ReadProcs(proc)
	want := []sandbox.Proc{{PID: 1, PPID: 0, Comm: "init"}, {PID: 42, PPID: 1, Comm: "a) (b)"}, {PID: 7, PPID: 1, Comm: "containerd-shim"}}
	slices.SortFunc(got, func(a, b sandbox.Proc) int { return a.PID - b.PID })
	slices.SortFunc(want, func(a, b sandbox.Proc) int { return a.PID - b.PID })
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ReadProcs = %v, %v; want %v", got, err, want)
	}
	if err := os.WriteFile(filepath.Join(proc, "1", "stat"), []byte("1 init S"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := host.ReadProcs(proc); err == nil || !strings.Contains(err.Error(), `want "pid (comm) state ppid ..."`) {
		t.Errorf("bad stat: %v", err)
	}
}
