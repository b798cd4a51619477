// Package cgroups finds, reads and writes cgroups on a cgroupfs mounted at a root passed in
// ("/sys/fs/cgroup"; a copied tree in tests). It knows both layouts
// (https://docs.kernel.org/admin-guide/cgroup-v2.html, .../cgroup-v1/cgroups.html):
//
//   - cgroup v2: one hierarchy at the root; controllers listed in <root>/cgroup.controllers;
//     cgroup /a/b is the directory <root>/a/b.
//   - cgroup v1: a hierarchy per controller (or co-mounted set) at <root>/<name>, e.g.
//     <root>/misc or <root>/cpu,cpuacct; cgroup /a/b of controller c is <root>/<name>/a/b.
//     A v2 mount at <root>/unified (hybrid) is not used.
//
// Path turns a runtime's cgroups path (the OCI/NRI Linux.CgroupsPath, cgroupfs or systemd
// driver syntax) into the cgroup path inside a hierarchy.
package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Version is the cgroup layout of a node.
type Version int

const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string {
	if v != V1 && v != V2 {
		return "unknown" // the zero Layout: nothing detected
	}
	return fmt.Sprintf("v%d", int(v))
}

// Layout is what Detect found at a cgroupfs root. It is a value: copy it freely.
type Layout struct {
	// Root is the cgroupfs mount point.
	Root    string
	Version Version
	// dirs maps each available controller to its hierarchy's directory under Root ("" on
	// v2; "cpu,cpuacct" for cpu on a v1 node that co-mounts them).
	dirs map[string]string
}

// Detect reads the layout of the cgroupfs mounted at root: v2 if root has
// cgroup.controllers, else v1 with one hierarchy per directory named after its
// controllers ("name=" hierarchies and the hybrid "unified" mount are skipped).
func Detect(root string) (Layout, error) {
	l := Layout{Root: root, dirs: map[string]string{}}
	ctrls, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	switch {
	case err == nil:
		l.Version = V2
		for _, c := range strings.Fields(string(ctrls)) {
			l.dirs[c] = ""
		}
		return l, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Layout{}, fmt.Errorf("detect cgroup layout at %s: %w", root, err)
	}
	l.Version = V1
	entries, err := os.ReadDir(root)
	if err != nil {
		return Layout{}, fmt.Errorf("detect cgroup layout at %s: %w", root, err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "unified" || name == "systemd" || strings.HasPrefix(name, "name=") {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, name)); err != nil || !st.IsDir() {
			continue // a stale symlink or a file: no hierarchy
		}
		for _, c := range strings.Split(name, ",") {
			if _, seen := l.dirs[c]; !seen || c == name {
				l.dirs[c] = name // "cpu" (often a symlink to cpu,cpuacct) over the co-mount
			}
		}
	}
	return l, nil
}

// Has reports whether controller is available: listed in the v2 root's cgroup.controllers,
// or mounted as (part of) a v1 hierarchy.
func (l Layout) Has(controller string) bool {
	_, ok := l.dirs[controller]
	return ok
}

// Controllers returns the available controllers, sorted.
func (l Layout) Controllers() []string {
	return slices.Sorted(maps.Keys(l.dirs))
}

// Dir returns the directory of cgroup path (as Path returns it, "/" for the root cgroup)
// in controller's hierarchy. Path must be absolute and clean.
func (l Layout) Dir(controller, path string) (string, error) {
	d, ok := l.dirs[controller]
	if !ok {
		return "", fmt.Errorf("no %s controller at %s (cgroup %s; available: %s)", controller, l.Root, l.Version,
			strings.Join(l.Controllers(), " "))
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return "", fmt.Errorf("cgroup path %q: want an absolute, clean path", path)
	}
	return filepath.Join(l.Root, d, path), nil
}
