package cgroups_test

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/nodeagent/cgroups/cgroupstest"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		layout   string
		version  cgroups.Version
		has, not []string
		miscRoot string // Dir("misc", "/") under the root
		cpuDir   string // Dir("cpu", "/a") under the root
	}{
		{layout: "v2", version: cgroups.V2, has: []string{"cpu", "memory", "misc", "hugetlb"}, not: []string{"cpuacct", "unified"},
			miscRoot: "/", cpuDir: "/a"},
		{layout: "v1", version: cgroups.V1, has: []string{"cpu", "cpuacct", "cpuset", "memory", "misc", "pids"},
			not: []string{"hugetlb", "unified", "systemd", "io"}, miscRoot: "/misc", cpuDir: "/cpu,cpuacct/a"},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			root := cgroupstest.Tree(t, tc.layout)
			l, err := cgroups.Detect(root)
			if err != nil {
				t.Fatal(err)
			}
			if l.Version != tc.version || l.Root != root {
				t.Errorf("Detect = %s at %s, want %s at %s", l.Version, l.Root, tc.version, root)
			}
			for _, c := range tc.has {
				if !l.Has(c) {
					t.Errorf("no %s; controllers %q", c, l.Controllers())
				}
			}
			for _, c := range tc.not {
				if l.Has(c) {
					t.Errorf("has %s; controllers %q", c, l.Controllers())
				}
			}
			if d, err := l.Dir("misc", "/"); err != nil || d != filepath.Join(root, tc.miscRoot) {
				t.Errorf(`Dir(misc, "/") = %q, %v`, d, err)
			}
			if d, err := l.Dir("cpu", "/a"); err != nil || d != filepath.Join(root, tc.cpuDir) {
				t.Errorf(`Dir(cpu, "/a") = %q, %v`, d, err)
			}
		})
	}
}

func TestDetectErrors(t *testing.T) {
	if _, err := cgroups.Detect(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "detect cgroup layout at ") {
		t.Errorf("missing root: %v", err)
	}
	root := cgroupstest.Tree(t, "v1")
	if err := os.RemoveAll(filepath.Join(root, "misc")); err != nil {
		t.Fatal(err)
	}
	l, err := cgroups.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Dir("misc", "/x")
	want := "no misc controller at " + root + " (cgroup v1; available: cpu cpuacct cpuset memory pids)"
	if err == nil || err.Error() != want {
		t.Errorf("Dir without misc: %v\nwant %s", err, want)
	}
	for _, p := range []string{"x", "/a/../b", "/a/"} {
		if _, err := l.Dir("cpu", p); err == nil || !strings.Contains(err.Error(), "want an absolute, clean path") {
			t.Errorf("Dir(cpu, %q): %v", p, err)
		}
	}
}

// TestDetectHost runs the real probe on this machine's /sys/fs/cgroup. The expected layout
// comes from /proc/self/mountinfo (cgroup2 mounted at the root: v2), not from the files
// Detect reads. On this project's test machines it is v1 without a misc hierarchy.
func TestDetectHost(t *testing.T) {
	const root = "/sys/fs/cgroup"
	fstype, misc := mountinfo(t, root)
	if fstype == "" {
		t.Skip("no cgroupfs at " + root)
	}
	l, err := cgroups.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	want := cgroups.V1
	if fstype == "cgroup2" {
		want = cgroups.V2
	}
	t.Logf("host %s: %s, controllers %q, misc mounted: %v", root, l.Version, l.Controllers(), misc)
	if l.Version != want {
		t.Errorf("Detect(%s) = %s; mountinfo says %s (%s)", root, l.Version, want, fstype)
	}
	if want == cgroups.V1 && l.Has("misc") != misc {
		t.Errorf("misc available %v; mountinfo says a misc hierarchy is mounted: %v", l.Has("misc"), misc)
	}
}

// mountinfo returns the file system type mounted at root and whether a v1 hierarchy with
// the misc controller is mounted under it.
func mountinfo(t *testing.T, root string) (fstype string, misc bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch mnt := fields[4]; {
		case mnt == root:
			fstype = tail[0]
		case filepath.Dir(mnt) == root && tail[0] == "cgroup" && slices.Contains(strings.Split(tail[2], ","), "misc"):
			misc = true
		}
	}
	return fstype, misc
}
