package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/sandbox/host"
)

// TestMigrationBlocked: a private cgroup namespace on an nsdelegate cgroup2 mount is named,
// with what to do; the host's namespace, or a mount without nsdelegate, is not.
func TestMigrationBlocked(t *testing.T) {
	const (
		nsdelegate = "36 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
		plain      = "36 25 0:30 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
		v1         = "40 25 0:34 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
	)
	for _, tc := range []struct {
		name, self, host, mountinfo string
		blocked                     bool
	}{
		{name: "own namespace, nsdelegate", self: "cgroup:[4026532500]", host: "cgroup:[4026531835]", mountinfo: v1 + nsdelegate, blocked: true},
		{name: "host namespace", self: "cgroup:[4026531835]", host: "cgroup:[4026531835]", mountinfo: nsdelegate},
		{name: "own namespace, no nsdelegate", self: "cgroup:[4026532500]", host: "cgroup:[4026531835]", mountinfo: plain},
		{name: "own namespace, cgroup v1 only", self: "cgroup:[4026532500]", host: "cgroup:[4026531835]", mountinfo: v1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			for pid, target := range map[string]string{"self": tc.self, "1": tc.host} {
				if err := os.MkdirAll(filepath.Join(proc, pid, "ns"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, filepath.Join(proc, pid, "ns", "cgroup")); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(proc, "self", "mountinfo"), []byte(tc.mountinfo), 0o644); err != nil {
				t.Fatal(err)
			}
			got := host.MigrationBlocked(proc)
			if tc.blocked != (got != "") || tc.blocked && !strings.Contains(got, "run the agent privileged") {
				t.Errorf("MigrationBlocked = %q, want blocked %v", got, tc.blocked)
			}
		})
	}
}
