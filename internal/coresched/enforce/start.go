package enforce

import (
	"errors"
	"fmt"
	"slices"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
)

// start locates a new member's tasks, gives them its group's cookie and records it. An
// error (logged by the agent) leaves the member recorded as failed. On a node that will
// never make cookies, only a member that asks for a group is recorded (it is reported as
// degraded): the others cost no I/O, record or metric series.
func (m *Manager) start(mem member, pid int, cgroupsPath string) error {
	m.mu.Lock()
	if m.unusable != nil && stateWithout(m.unusable) == StateUnsupported {
		if mem.Group.Explicit() && !mem.Group.None() {
			mem.State = StateUnsupported
			m.record(mem, 0)
		}
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	pids, lerr := m.locate(&mem, pid, cgroupsPath)
	m.mu.Lock()
	defer m.mu.Unlock()
	var cookie kernel.Cookie
	var err error
	switch {
	case mem.Group.None():
		mem.State = StateNone
	case m.unusable != nil:
		mem.State = stateWithout(m.unusable)
	case lerr != nil:
		mem.State, err = StateFailed, lerr
	default:
		cookie, err = m.join(&mem, pids)
	}
	m.record(mem, cookie)
	if err != nil {
		return fmt.Errorf("core scheduling group %s: %w", mem.Group, err)
	}
	if mem.State == StateOK {
		m.log.Info("core scheduling cookie", "pod", mem.Pod, "container", mem.Name, "group", mem.Group.String(),
			"pid", mem.Pid, "tasks", len(pids))
	}
	return nil
}

// locate finds mem's cgroup and its processes: pid first when the runtime gave one, then
// the rest of the cgroup's. It never returns the agent's own pid.
func (m *Manager) locate(mem *member, pid int, cgroupsPath string) ([]int, error) {
	path, err := m.cg.pathOf(cgroupsPath)
	if err != nil && pid > 0 {
		if b, ferr := m.proc.cgroupFile(pid); ferr == nil {
			if p, ok := m.cg.taskCgroup(b); ok {
				path, err = p, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("find the cgroup: %w", err)
	}
	mem.Cgroup = path
	pids, err := m.cg.procs(path)
	if err != nil && pid <= 0 {
		return nil, err
	}
	pids = slices.DeleteFunc(pids, func(p int) bool { return p == pid || p == m.self })
	if pid > 0 && pid != m.self {
		pids = append([]int{pid}, pids...)
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("cgroup %s has no process", path)
	}
	mem.Start, _ = m.proc.startTime(pids[0])
	return pids, nil
}

// join gives pids (mem's processes) the cookie of mem's group: shared from a live member,
// or a new one when the group has none. The caller holds m.mu.
func (m *Manager) join(mem *member, pids []int) (kernel.Cookie, error) {
	mem.State, mem.Pid = StateFailed, pids[0]
	if want := m.book.cookie(mem.Group); want != 0 {
		if src, ok := m.source(mem.Group, want); ok {
			if err := m.shareAll(src, pids); err != nil {
				return 0, err
			}
			mem.State = StateOK
			return want, nil
		}
	}
	if err := m.guard(); err != nil {
		m.setUnusableLocked(err)
		mem.State = StateGuard
		return 0, fmt.Errorf("no cookie created: %w", err)
	}
	if err := m.k.Create(pids[0], kernel.Process); err != nil {
		return 0, err
	}
	c, err := m.k.Get(pids[0])
	switch {
	case err != nil:
		return 0, err
	case c == 0:
		return 0, fmt.Errorf("pid %d: new cookie %w", pids[0], errUnreadable)
	}
	if err := m.shareAll(pids[0], pids[1:]); err != nil {
		return 0, err
	}
	mem.State = StateOK
	return c, nil
}

// source returns a task of group g's members that carries cookie want: each member's
// recorded task, else a process of its cgroup. The caller holds m.mu.
func (m *Manager) source(g coresched.Group, want kernel.Cookie) (int, bool) {
	for _, s := range m.book.sources(g) {
		if c, err := m.k.Get(s.Pid); err == nil && c == want {
			return s.Pid, true
		}
		pids, _ := m.cg.procs(s.Cgroup)
		for _, p := range pids {
			if p == s.Pid || p == m.self {
				continue
			}
			if c, err := m.k.Get(p); err == nil && c == want {
				return p, true
			}
		}
	}
	return 0, false
}

// shareAll gives each process of pids the cookie of task src.
func (m *Manager) shareAll(src int, pids []int) error {
	for _, p := range pids {
		if err := m.k.Share(src, p, kernel.Process); err != nil {
			return err
		}
	}
	return nil
}

var errStale = errors.New("member or group cookie changed meanwhile")

// repair gives task pid at scope the cookie of member id's group through share, if that is
// still want.
func (m *Manager) repair(id string, want kernel.Cookie, pid int, scope kernel.Scope, share shareFunc) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.book.members[id]
	if !ok || mem.State != StateOK || m.book.cookie(mem.Group) != want {
		return errStale
	}
	src, ok := m.source(mem.Group, want)
	if !ok {
		return fmt.Errorf("group %s: no live task carries its cookie", mem.Group)
	}
	return share(src, pid, scope)
}

// record puts mem in the book and the metrics. The caller holds m.mu.
func (m *Manager) record(mem member, cookie kernel.Cookie) {
	m.book.put(mem, cookie)
	m.met.setMember(mem)
	m.met.groups.Set(float64(len(m.book.groups)))
}
