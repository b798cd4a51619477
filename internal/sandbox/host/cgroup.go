// Package host applies VM sandbox limits (package sandbox) on the host. A pod's sandbox
// cgroup is podfence-vm-<sandbox id> in the pod's cgroup (beside the cgroups of the pod's
// sandbox and containers, so the pod's own limits still bound it):
//
//	cgroup v1, cgroupfs driver: /sys/fs/cgroup/{cpuset,cpu,memory,pids}/kubepods/burstable/pod<uid>/podfence-vm-<id>
//	cgroup v2, systemd driver:  /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/podfence-vm-<id>
//
// Create makes it (or adopts it, if it exists: after an agent restart), Set writes its
// limits, Place moves processes into it with every thread, and Remove moves whatever is
// left to the parent and removes it. Every read and write goes through a Cgroupfs and a
// /proc root passed in.
package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// Cgroupfs is the kernel edge; cgroups.OS is the real one.
type Cgroupfs interface {
	Mkdir(dir string) (created []string, err error)
	Rmdir(dir string) error
	Read(dir, name string) ([]byte, error)
	Write(dir, name, value string) error
}

var _ Cgroupfs = cgroups.OS{}

// controllers are the controllers of a sandbox cgroup, in the order they are set up:
// cpuset first, since a v1 cpuset cgroup takes no task before it has CPUs and memory nodes.
func controllers() []string { return []string{"cpuset", "cpu", "memory", "pids"} }

// Name is the sandbox cgroup's name for a pod sandbox ID.
func Name(sandboxID string) string { return "podfence-vm-" + sandboxID }

// PathFor returns the cgroup path of a pod's sandbox cgroup: Name(sandboxID) in the pod's
// cgroup, which is the directory of the sandbox's own cgroup (cgroupsPath, NRI
// PodSandbox.Linux.CgroupsPath, either driver's syntax) or, if the runtime gave none,
// cgroupParent (a cgroupfs path or a systemd slice).
func PathFor(sandboxID, cgroupsPath, cgroupParent string) (string, error) {
	if sandboxID == "" || strings.ContainsAny(sandboxID, "/\x00") {
		return "", fmt.Errorf("pod sandbox ID %q: want a non-empty name without '/'", sandboxID)
	}
	var parent string
	switch {
	case cgroupsPath != "":
		p, _, err := cgroups.Path(cgroupsPath)
		if err != nil {
			return "", fmt.Errorf("the sandbox's cgroups path: %w", err)
		}
		parent = filepath.Dir(p)
	case strings.HasPrefix(cgroupParent, "/"):
		parent = filepath.Clean(cgroupParent)
	case cgroupParent != "":
		// A slice: let Path expand it, with a child slice as the unit.
		p, _, err := cgroups.Path(cgroupParent + "::" + Name(sandboxID) + ".slice")
		if err != nil {
			return "", fmt.Errorf("the pod's cgroup parent: %w", err)
		}
		parent = filepath.Dir(p)
	default:
		return "", errors.New("the runtime gave neither the sandbox's cgroups path nor the pod's cgroup parent")
	}
	return filepath.Join(parent, Name(sandboxID)), nil
}

// Cgroup is a sandbox cgroup: the same path in each controller's hierarchy (v1) or one
// directory (v2).
type Cgroup struct {
	fs     Cgroupfs
	layout cgroups.Layout
	path   string
	dirs   map[string]string // controller → directory, for the controllers the node has
}

// Open resolves the sandbox cgroup at path (PathFor) in layout. Controllers the node lacks
// are left out; Set fails only if a limit needs one.
func Open(fs Cgroupfs, layout cgroups.Layout, path string) (*Cgroup, error) {
	c := &Cgroup{fs: fs, layout: layout, path: path, dirs: map[string]string{}}
	for _, ctrl := range controllers() {
		if !layout.Has(ctrl) {
			continue
		}
		d, err := layout.Dir(ctrl, path)
		if err != nil {
			return nil, err
		}
		c.dirs[ctrl] = d
	}
	if len(c.dirs) == 0 {
		return nil, fmt.Errorf("no cpuset, cpu, memory or pids controller at %s (cgroup %s)", layout.Root, layout.Version)
	}
	return c, nil
}

// Path is the cgroup path.
func (c *Cgroup) Path() string { return c.path }

// Dir returns the directory of the cgroup in controller's hierarchy.
func (c *Cgroup) Dir(controller string) (string, bool) {
	d, ok := c.dirs[controller]
	return d, ok
}

// hierarchies returns the distinct directories with one controller each (cpu and cpuacct
// may share one; on v2 all share one), in setup order.
func (c *Cgroup) hierarchies() [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	for _, ctrl := range controllers() {
		if d, ok := c.dirs[ctrl]; ok && !seen[d] {
			seen[d] = true
			out = append(out, [2]string{ctrl, d})
		}
	}
	return out
}

// Create makes the cgroup in every hierarchy, or adopts it where it exists, and returns
// the directories it made, outermost first. On v2 it then enables the controllers in
// cgroup.subtree_control from the root down to the parent, as runc does (enabling one
// adds its files to existing children).
func (c *Cgroup) Create() ([]string, error) {
	var created []string
	for _, h := range c.hierarchies() {
		made, err := c.fs.Mkdir(h[1])
		created = append(created, made...)
		if err != nil {
			return created, err
		}
	}
	if c.layout.Version != cgroups.V2 {
		return created, nil
	}
	dir := c.layout.Root
	if err := c.enableIn(dir); err != nil {
		return created, err
	}
	if rel := strings.Trim(filepath.Dir(c.path), "/"); rel != "" {
		for _, part := range strings.Split(rel, "/") {
			dir = filepath.Join(dir, part)
			if err := c.enableIn(dir); err != nil {
				return created, err
			}
		}
	}
	return created, nil
}

// enableIn writes the missing available sandbox controllers to dir's cgroup.subtree_control.
func (c *Cgroup) enableIn(dir string) error {
	avail, err := c.fs.Read(dir, "cgroup.controllers")
	if err != nil {
		return err
	}
	on, err := c.fs.Read(dir, "cgroup.subtree_control")
	if err != nil {
		return err
	}
	var add []string
	for _, ctrl := range controllers() {
		if has(avail, ctrl) && !has(on, ctrl) {
			add = append(add, "+"+ctrl)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := c.fs.Write(dir, "cgroup.subtree_control", strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enable the sandbox controllers: %w", err)
	}
	return nil
}

func has(list []byte, word string) bool {
	for _, w := range strings.Fields(string(list)) {
		if w == word {
			return true
		}
	}
	return false
}

// Remove moves the processes left in the cgroup to its parent (to the root cgroup if the
// parent takes none: a v2 parent with controllers enabled), removes the cgroup in every
// hierarchy, then the directories of created (as Create returned them) innermost first,
// leaving any still in use. It returns how many processes it moved.
func (c *Cgroup) Remove(created []string) (int, error) {
	moved := map[string]bool{}
	var errs []error
	for _, h := range c.hierarchies() {
		err := c.evacuate(h[0], h[1], moved)
		if err == nil {
			err = c.rmdir(h[1])
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := c.fs.Rmdir(created[i]); err != nil && !cgroups.Gone(err) {
			break // still in use, as are its parents
		}
	}
	return len(moved), errors.Join(errs...)
}

// evacuate moves the processes of dir to its parent, or to the root of controller's
// hierarchy, adding them to moved.
func (c *Cgroup) evacuate(controller, dir string, moved map[string]bool) error {
	b, err := c.fs.Read(dir, "cgroup.procs")
	if cgroups.Gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	root, _ := c.layout.Dir(controller, "/")
	for _, pid := range strings.Fields(string(b)) {
		err := c.fs.Write(filepath.Dir(dir), "cgroup.procs", pid)
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			err = c.fs.Write(root, "cgroup.procs", pid)
		}
		switch {
		case err == nil:
			moved[pid] = true
		case !errors.Is(err, syscall.ESRCH):
			return fmt.Errorf("move process %s out of %s: %w", pid, dir, err)
		}
	}
	return nil
}

// rmdir removes dir, retrying while the kernel still counts exiting tasks (EBUSY).
func (c *Cgroup) rmdir(dir string) error {
	var err error
	for i := range 5 {
		if err = c.fs.Rmdir(dir); err == nil || cgroups.Gone(err) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(time.Duration(10<<i) * time.Millisecond)
	}
	return err
}
