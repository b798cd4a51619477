package cgroups

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Driver is the runtime's cgroup driver, as a cgroups path's syntax shows it.
type Driver int

const (
	Cgroupfs Driver = iota
	Systemd
)

func (d Driver) String() string {
	if d == Systemd {
		return "systemd"
	}
	return "cgroupfs"
}

// Path returns the cgroup path (absolute and clean, "/" for the root cgroup) that the
// runtime (runc, crun) makes of cgroupsPath, the OCI linux.cgroupsPath NRI passes, and the
// driver its syntax implies:
//
//   - cgroupfs: an absolute path, used as it is: "/kubepods/burstable/pod<uid>/<id>".
//   - systemd: "<slice>:<prefix>:<name>". The slice is expanded into its parents as systemd
//     does ("kubepods-burstable-pod<uid>.slice" is
//     /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice; empty is
//     system.slice, "-.slice" the root), then the unit follows: "<prefix>-<name>.scope"
//     (containerd's "cri-containerd-<id>.scope", CRI-O's "crio-<id>.scope"), or <name>
//     itself when it ends in ".slice".
//
// A relative cgroupfs path is refused: the runtime would put it under its own cgroup.
func Path(cgroupsPath string) (string, Driver, error) {
	switch {
	case cgroupsPath == "":
		return "", Cgroupfs, errors.New("empty cgroups path: the runtime chooses the cgroup itself")
	case strings.HasPrefix(cgroupsPath, "/"):
		return filepath.Clean(cgroupsPath), Cgroupfs, nil
	case strings.Count(cgroupsPath, ":") != 2:
		return "", Cgroupfs, fmt.Errorf("cgroups path %q: want an absolute cgroupfs path or systemd's "+
			`"<slice>:<prefix>:<name>"`, cgroupsPath)
	}
	parts := strings.Split(cgroupsPath, ":")
	slice, prefix, name := parts[0], parts[1], parts[2]
	if slice == "" {
		slice = "system.slice"
	}
	dir, err := expandSlice(slice)
	if err != nil {
		return "", Systemd, fmt.Errorf("cgroups path %q: %w", cgroupsPath, err)
	}
	if name == "" || strings.Contains(prefix+name, "/") {
		return "", Systemd, fmt.Errorf("cgroups path %q: want a unit name and prefix without '/'", cgroupsPath)
	}
	unit := name
	if !strings.HasSuffix(name, ".slice") {
		unit = prefix + "-" + name + ".scope" // as runc: an empty prefix still gives "-<name>.scope"
	}
	return filepath.Join(dir, unit), Systemd, nil
}

// expandSlice turns a systemd slice name into its cgroup path: "a-b.slice" is
// /a.slice/a-b.slice.
func expandSlice(slice string) (string, error) {
	const suffix = ".slice"
	name, ok := strings.CutSuffix(slice, suffix)
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("slice %q: want a name ending in %s, without '/'", slice, suffix)
	}
	if name == "-" {
		return "/", nil
	}
	var path, prefix strings.Builder
	path.WriteString("/")
	for i, part := range strings.Split(name, "-") {
		if part == "" {
			return "", fmt.Errorf("slice %q: empty component between '-'", slice)
		}
		if i > 0 {
			path.WriteString("/")
		}
		prefix.WriteString(part)
		path.WriteString(prefix.String() + suffix)
		prefix.WriteString("-")
	}
	return path.String(), nil
}
