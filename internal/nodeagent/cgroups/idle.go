package cgroups

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// CPUIdle is the cgroup v2 cpu controller's file (Linux 5.15) that makes a cgroup idle among
// its siblings: "1" schedules its tasks as SCHED_IDLE against theirs, "0" (the default) as
// usual (https://docs.kernel.org/admin-guide/cgroup-v2.html#cpu-interface-files). While it is
// 1 the kernel refuses writes to the cgroup's cpu.weight (EINVAL).
const CPUIdle = "cpu.idle"

// ErrNoCPUIdle: the node's cgroups have no cpu.idle.
var ErrNoCPUIdle = errors.New("no cpu.idle")

// CPUIdleDir returns the directory of cgroup path's cpu.idle. It is ErrNoCPUIdle on cgroup v1
// (cpu.idle is a cgroup v2 file) and without the v2 cpu controller. A kernel before 5.15 has
// the directory but not the file: Write then fails with fs.ErrNotExist.
func (l Layout) CPUIdleDir(path string) (string, error) {
	switch {
	case l.Version == V1:
		return "", fmt.Errorf("%w: cgroup v1 at %s has none (it is a cgroup v2 file, Linux 5.15)", ErrNoCPUIdle, l.Root)
	case l.Version != V2:
		return "", fmt.Errorf("%w: no cgroup layout detected", ErrNoCPUIdle)
	case !l.Has("cpu"):
		return "", fmt.Errorf("%w: the cgroup v2 root %s does not list the cpu controller (available: %s)", ErrNoCPUIdle,
			l.Root, strings.Join(l.Controllers(), " "))
	}
	return l.Dir("cpu", path)
}

// ParentPath returns the cgroup path (absolute and clean) of a pod's cgroup parent as the
// kubelet gives it to the runtime (NRI PodSandbox.Linux.CgroupParent): cgroupfs
// "/kubepods/besteffort/pod<uid>" as it is, systemd "kubepods-besteffort-pod<uid>.slice"
// expanded into its parents as systemd does.
func ParentPath(parent string) (string, error) {
	switch {
	case strings.HasPrefix(parent, "/"):
		return filepath.Clean(parent), nil
	case strings.HasSuffix(parent, ".slice"):
		p, err := expandSlice(parent)
		if err != nil {
			return "", fmt.Errorf("cgroup parent %q: %w", parent, err)
		}
		return p, nil
	}
	return "", fmt.Errorf("cgroup parent %q: want an absolute cgroupfs path or a systemd slice (<name>.slice)", parent)
}
