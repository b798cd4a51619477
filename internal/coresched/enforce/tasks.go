package enforce

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// procFS reads tasks under a proc root ("/proc"; a fake tree in tests).
type procFS struct{ root string }

// threads lists the thread ids of process pid, sorted; fs.ErrNotExist when it is gone.
func (p procFS) threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(p.root, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, fmt.Errorf("list threads of %d: %w", pid, err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	return tids, nil
}

// cgroupFile returns /proc/<pid>/cgroup (pid may be a thread id).
func (p procFS) cgroupFile(pid int) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("read cgroup of %d: %w", pid, err)
	}
	return b, nil
}

// startTime returns when process pid started, in clock ticks since boot (proc(5) stat
// field 22): an order for "oldest", not a time.
func (p procFS) startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	// The command (field 2) is in parentheses and may hold spaces: count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return 0, fmt.Errorf("stat of %d: %q: want at least 22 fields", pid, b)
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat of %d: start time %q: %w", pid, f[19], err)
	}
	return v, nil
}

// cgroupFS finds container cgroups and their processes under a cgroupfs root. On cgroup v2
// it reads the one hierarchy; on v1 one hierarchy that runtimes always populate.
type cgroupFS struct {
	root string
	dir  string // hierarchy directory under root: "" on v2, e.g. "pids" on v1
	ctrl string // v1: the controller to find in /proc/<pid>/cgroup ("pids", "name=systemd")
}

// v1Hierarchies are tried in order; every runtime puts container tasks in each of them.
var v1Hierarchies = []struct{ dir, ctrl string }{
	{"pids", "pids"}, {"cpu", "cpu"}, {"cpu,cpuacct", "cpu"}, {"memory", "memory"},
	{"cpuset", "cpuset"}, {"systemd", "name=systemd"},
}

// detectCgroups picks the hierarchy to read under root.
func detectCgroups(root string) (cgroupFS, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return cgroupFS{root: root}, nil
	}
	for _, h := range v1Hierarchies {
		if _, err := os.Stat(filepath.Join(root, h.dir, "cgroup.procs")); err == nil {
			return cgroupFS{root: root, dir: h.dir, ctrl: h.ctrl}, nil
		}
	}
	return cgroupFS{}, fmt.Errorf("no cgroup v2 (cgroup.controllers) or v1 hierarchy (%s) at %s",
		"pids, cpu, memory, cpuset or systemd", root)
}

func (c cgroupFS) String() string {
	if c.dir == "" {
		return "cgroup v2 at " + c.root
	}
	return "cgroup v1 " + c.dir + " at " + c.root
}

// pathOf turns a runtime's cgroups path (cgroupfs "/a/b" or systemd "slice:prefix:name")
// into the cgroup path inside the hierarchy.
func (c cgroupFS) pathOf(cgroupsPath string) (string, error) {
	p, _, err := cgroups.Path(cgroupsPath)
	return p, err
}

// procs lists the processes of cgroup path; fs.ErrNotExist when the cgroup is gone.
func (c cgroupFS) procs(path string) ([]int, error) {
	file := filepath.Join(c.root, c.dir, path, "cgroup.procs")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: pid %q: %w", file, f, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// taskCgroup finds the task's cgroup path in the hierarchy in /proc/<pid>/cgroup:
//
//	0::/kubepods/pod1/c1            (v2)
//	5:pids:/kubepods/pod1/c1        (v1; co-mounted controllers are comma-separated)
func (c cgroupFS) taskCgroup(procCgroup []byte) (string, bool) {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if c.dir == "" && f[0] == "0" && f[1] == "" {
			return f[2], true
		}
		if c.dir != "" && slices.Contains(strings.Split(f[1], ","), c.ctrl) {
			return f[2], true
		}
	}
	return "", false
}

// gone reports whether err says a task or cgroup no longer exists.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, kernel.ErrNoTask)
}
