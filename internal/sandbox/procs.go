package sandbox

import (
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
// The root is the anchor if it is a shim, else the anchor's parent if that is a shim, else
// the anchor alone. Members are the root and all its descendants except:
//   - processes other than the anchor for which skip returns true, with their descendants (the caller skips
//     container processes: the pids NRI reports for containers, and processes in a
//     container's cgroup, as under a runc-backed handler);
//   - runc and its init ("runc", "runc:[2:INIT]"): a runc shim's short-lived helpers,
//     which move into a container's cgroup by themselves.
//
// Nil if the anchor is not in the table.
func Members(table []Proc, anchor int, skip func(Proc) bool) []int {
	byPID := make(map[int]Proc, len(table))
	children := map[int][]Proc{}
	for _, p := range table {
		byPID[p.PID] = p
		children[p.PPID] = append(children[p.PPID], p)
	}
	a, ok := byPID[anchor]
	if !ok || anchor <= 0 {
		return nil
	}
	root := a
	if parent, ok := byPID[a.PPID]; a.Comm != ShimComm && ok && parent.Comm == ShimComm {
		root = parent
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

func isRunc(comm string) bool { return comm == "runc" || strings.HasPrefix(comm, "runc:") }
