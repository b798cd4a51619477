package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Proc is one host process, as /proc/<pid>/stat shows it.
type Proc struct {
	PID, PPID int
	// Comm is the command name, at most 15 bytes ("containerd-shim" for every
	// containerd-shim-*-v2).
	Comm string
}

// ShimComm is the command name of containerd's runtime shims, truncated by the kernel.
const ShimComm = "containerd-shim"

// Members returns the host processes of a VM sandbox, the shim first, from a snapshot of
// the process table. anchor is the sandbox's pid as the runtime reports it (NRI
// PodSandbox.Pid): Kata's containerd-shim-kata-v2 reports the hypervisor's pid (QEMU,
// Cloud Hypervisor, Firecracker), whose parent is the shim (a child subreaper, so it also
// adopts a daemonised QEMU); a runc-backed handler reports the pause process, whose parent
// is containerd-shim-runc-v2; a shim with a built-in VMM may report itself.
//
// The root is the anchor if it is a shim, else the anchor's parent if that is a shim (see
// Root). Members are the root and all its descendants except:
//   - processes other than the anchor for which skip returns true, with their descendants (the caller skips
//     container processes: the pids NRI reports for containers, and processes in a
//     container's cgroup, as under a runc-backed handler);
//   - runc and its init ("runc", "runc:[2:INIT]"): a runc shim's short-lived helpers,
//     which move into a container's cgroup by themselves.
//
// Nil if Root finds no root.
func Members(table []Proc, anchor int, skip func(Proc) bool) []int {
	byPID := make(map[int]Proc, len(table))
	children := map[int][]Proc{}
	for _, p := range table {
		byPID[p.PID] = p
		children[p.PPID] = append(children[p.PPID], p)
	}
	root, err := rootOf(byPID, anchor)
	if err != nil {
		return nil
	}
	members := []int{root.PID}
	seen := map[int]bool{root.PID: true} // a snapshot taken while pids are reused may loop
	queue := []Proc{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		kids := children[p.PID]
		slices.SortFunc(kids, func(a, b Proc) int { return a.PID - b.PID })
		for _, k := range kids {
			if seen[k.PID] || isRunc(k.Comm) || (k.PID != anchor && skip != nil && skip(k)) {
				continue
			}
			seen[k.PID] = true
			members = append(members, k.PID)
			queue = append(queue, k)
		}
	}
	return members
}

// Root returns the process a VM sandbox's processes descend from: the anchor if it is a
// runtime shim, else its parent if that is one. Anything else is an error: the anchor is
// gone, or it is neither a shim nor a shim's child, which is what a pid the kernel gave to
// another process after the sandbox ended looks like (a sandbox the runtime lists after a
// restart still carries the pid it had); its processes must not be moved.
func Root(table []Proc, anchor int) (Proc, error) {
	byPID := make(map[int]Proc, len(table))
	for _, p := range table {
		byPID[p.PID] = p
	}
	return rootOf(byPID, anchor)
}

func rootOf(byPID map[int]Proc, anchor int) (Proc, error) {
	a, ok := byPID[anchor]
	switch {
	case anchor <= 0:
		return Proc{}, errors.New("the runtime reported no pid for the sandbox")
	case !ok:
		return Proc{}, fmt.Errorf("the sandbox's process %d is gone", anchor)
	case isShim(a.Comm):
		return a, nil
	}
	if parent, ok := byPID[a.PPID]; ok && isShim(parent.Comm) {
		return parent, nil
	}
	return Proc{}, fmt.Errorf("the sandbox's process %d (%s) is neither a runtime shim nor a shim's child: "+
		"not moved (a pid reused after the sandbox ended?)", anchor, a.Comm)
}

// isShim: containerd's shims, and CRI-O's conmon (which parents a runc sandbox's pause).
func isShim(comm string) bool { return comm == ShimComm || comm == ConmonComm }

// ConmonComm is CRI-O's container monitor's command name.
const ConmonComm = "conmon"

func isRunc(comm string) bool { return comm == "runc" || strings.HasPrefix(comm, "runc:") }
