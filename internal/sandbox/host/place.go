package host

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
	"syscall"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/sandbox"
)

// ReadProcs reads the process table under proc ("/proc"): each process's pid, parent and
// command name. Processes that exit meanwhile are left out.
func ReadProcs(proc string) ([]sandbox.Proc, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("read the process table: %w", err)
	}
	var table []sandbox.Proc
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		p, err := parseStat(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(proc, e.Name(), "stat"), err)
		}
		table = append(table, p)
	}
	return table, nil
}

// parseStat reads "pid (comm) state ppid ..." (proc(5)); comm may hold spaces and ')'.
func parseStat(b []byte) (sandbox.Proc, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return sandbox.Proc{}, fmt.Errorf("stat %.40q: want \"pid (comm) state ppid ...\"", b)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	rest := strings.Fields(string(b[end+1:]))
	if err != nil || len(rest) < 2 {
		return sandbox.Proc{}, fmt.Errorf("stat %.40q: want \"pid (comm) state ppid ...\"", b)
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return sandbox.Proc{}, fmt.Errorf("stat %.40q: parent pid %q", b, rest[1])
	}
	return sandbox.Proc{PID: pid, PPID: ppid, Comm: string(b[open+1 : end])}, nil
}

// Placement is what Place found and did.
type Placement struct {
	Processes int // processes in the cgroup
	Threads   int // their threads
	Moved     int // threads that were elsewhere and were moved in
}

// Place moves processes pids into the cgroup with every thread, and checks each thread in
// /proc/<pid>/task/<tid>/cgroup. Per hierarchy where any thread is elsewhere, it writes the
// pid to cgroup.procs, which moves all threads at once; on v1, threads still elsewhere
// after that (put there one by one, as a hypervisor's manager may do with vCPU threads) go
// one by one to tasks. On v2 a thread can be elsewhere only in a threaded subtree, which
// is reported. Processes that exit meanwhile are skipped.
func (c *Cgroup) Place(proc string, pids []int) (Placement, error) {
	var p Placement
	var errs []error
	for _, pid := range pids {
		moved, threads, err := c.placeOne(proc, pid)
		if err != nil {
			errs = append(errs, fmt.Errorf("process %d: %w", pid, err))
		}
		if threads > 0 {
			p.Processes++
			p.Threads += threads
			p.Moved += moved
		}
	}
	return p, errors.Join(errs...)
}

// placeOne places process pid; it returns how many threads it moved and has.
func (c *Cgroup) placeOne(proc string, pid int) (moved, threads int, err error) {
	movedTIDs := map[int]bool{}
	for _, h := range c.hierarchies() {
		ctrl, dir := h[0], h[1]
		off, err := c.offThreads(proc, pid, ctrl)
		switch {
		case gone(err):
			return 0, 0, nil
		case err != nil:
			return len(movedTIDs), 0, err
		case len(off) == 0:
			continue
		}
		if err := c.fs.Write(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			if gone(err) {
				return 0, 0, nil
			}
			return len(movedTIDs), 0, err
		}
		for _, tid := range off {
			movedTIDs[tid] = true
		}
		still, err := c.offThreads(proc, pid, ctrl)
		if err != nil {
			return len(movedTIDs), 0, err
		}
		for _, tid := range still {
			if c.layout.Version == cgroups.V2 {
				return len(movedTIDs), 0, fmt.Errorf("thread %d stays outside %s (a threaded cgroup?)", tid, c.path)
			}
			if err := c.fs.Write(dir, "tasks", strconv.Itoa(tid)); err != nil && !gone(err) {
				return len(movedTIDs), 0, err
			}
		}
	}
	tids, err := tasks(proc, pid)
	if gone(err) {
		return 0, 0, nil
	}
	return len(movedTIDs), len(tids), err
}

// offThreads returns the threads of pid that are not in the cgroup in ctrl's hierarchy.
func (c *Cgroup) offThreads(proc string, pid int, ctrl string) ([]int, error) {
	tids, err := tasks(proc, pid)
	if err != nil {
		return nil, err
	}
	var off []int
	for _, tid := range tids {
		b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "task", strconv.Itoa(tid), "cgroup"))
		if err != nil {
			if gone(err) {
				continue // the thread exited
			}
			return nil, err
		}
		if path, ok := cgroupIn(b, ctrl, c.layout.Version); !ok || path != c.path {
			off = append(off, tid)
		}
	}
	return off, nil
}

// CgroupOf returns process pid's cgroup path in the hierarchy of the cgroup's first
// controller (cpuset on v1 nodes that have it; the unified one on v2).
func (c *Cgroup) CgroupOf(proc string, pid int) (string, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return "", err
	}
	ctrl := c.hierarchies()[0][0]
	path, ok := cgroupIn(b, ctrl, c.layout.Version)
	if !ok {
		return "", fmt.Errorf("process %d is in no %s cgroup", pid, ctrl)
	}
	return path, nil
}

// cgroupIn finds the cgroup path in a /proc/<pid>/cgroup file ("hierarchy:controllers:path"
// lines): on v1 the line listing ctrl, on v2 the "0::" line.
func cgroupIn(b []byte, ctrl string, v cgroups.Version) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v == cgroups.V2 && parts[0] == "0" && parts[1] == "" {
			return parts[2], true
		}
		if v == cgroups.V1 && slices.Contains(strings.Split(parts[1], ","), ctrl) {
			return parts[2], true
		}
	}
	return "", false
}

// tasks lists the thread IDs of process pid.
func tasks(proc string, pid int) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(proc, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// gone reports whether err says a process or thread is gone.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
