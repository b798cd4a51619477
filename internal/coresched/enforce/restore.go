package enforce

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// found is a live member at restart with what its tasks carry.
type found struct {
	mem     member
	pids    []int
	obs     observation
	holders map[kernel.Cookie]int // a task carrying each cookie seen
}

// Synchronize rebuilds group → cookie from the live tasks of the runtime's pods and
// containers (GET on every thread): each group keeps the cookie most of its members carry
// (see converge), a group whose members carry none gets a new one on its oldest member, and
// a reconcile pass then gives the chosen cookie to every task without it. A member whose
// tasks all carry their group's cookie is not touched.
func (m *Manager) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error {
	var live []found
	var idle []member // no cookie wanted or possible
	podByID := map[string]*api.PodSandbox{}
	add := func(pod *api.PodSandbox, id, name string, pid int, cgroupsPath string) {
		g, err := m.groupOf(pod)
		if err != nil {
			return
		}
		mem := member{ID: id, Pod: podName(pod), Sandbox: pod.GetId(), Name: name, Group: g}
		pids, lerr := m.locate(&mem, pid, cgroupsPath)
		switch {
		case lerr != nil:
			return // not running
		case g.None():
			mem.State = StateNone
		case m.Status().Err != nil:
			mem.State = stateWithout(m.Status().Err)
		default:
			live = append(live, m.observe(mem, pids))
			return
		}
		idle = append(idle, mem)
	}
	for _, p := range pods {
		podByID[p.GetId()] = p
		add(p, p.GetId(), "", int(p.GetPid()), p.GetLinux().GetCgroupsPath())
		if g, err := m.groupOf(p); err == nil {
			m.noteUnknown(p, g)
			m.setIdle(p) // idempotent: a restarted agent writes the same value
		}
	}
	m.mu.Lock()
	for id := range m.idle {
		if podByID[id] == nil {
			delete(m.idle, id)
		}
	}
	for id := range m.unknown {
		if podByID[id] == nil {
			delete(m.unknown, id)
		}
	}
	m.mu.Unlock()
	for _, c := range ctrs {
		if p := podByID[c.GetPodSandboxId()]; p != nil && c.GetState() != api.ContainerState_CONTAINER_STOPPED {
			add(p, c.GetId(), c.GetName(), int(c.GetPid()), c.GetLinux().GetCgroupsPath())
		}
	}
	obs := make([]observation, len(live))
	for i, f := range live {
		obs[i] = f.obs
	}
	chosen := converge(obs)

	m.mu.Lock()
	for _, mem := range m.book.list() {
		m.met.dropMember(mem)
	}
	m.book = newBook()
	created, errs := m.createMissing(live, chosen)
	for _, f := range live {
		mem := f.mem
		mem.State = StateFailed
		if c, ok := chosen[mem.Group.ID()]; ok {
			mem.State, mem.Pid = StateOK, f.pids[0]
			if h, ok := f.holders[c]; ok {
				mem.Pid = h
			}
		}
		m.record(mem, chosen[mem.Group.ID()])
	}
	for _, mem := range idle {
		m.record(mem, 0)
	}
	m.mu.Unlock()
	rep := m.reconcile(true)
	m.log.Info("core scheduling restored from live tasks", "groups", len(chosen), "created", created,
		"members", len(live), "without cookie", len(idle), "repaired", rep.Repaired,
		"errors", errors.Join(append(errs, rep.Errs...)...))
	return nil
}

// observe reads the cookie of every thread of mem's processes.
func (m *Manager) observe(mem member, pids []int) found {
	f := found{mem: mem, pids: pids, holders: map[kernel.Cookie]int{},
		obs: observation{ID: mem.ID, Group: mem.Group.ID(), Start: mem.Start, Cookies: map[kernel.Cookie]int{}}}
	for _, pid := range pids {
		if st, err := m.proc.startTime(pid); err == nil {
			f.obs.Start = min(f.obs.Start, st)
		}
		tids, _ := m.proc.threads(pid)
		for _, tid := range tids {
			c, err := m.k.Get(tid)
			if err != nil {
				continue
			}
			f.obs.Cookies[c]++
			if _, ok := f.holders[c]; !ok {
				f.holders[c] = tid
			}
		}
	}
	return f
}

// createMissing creates a cookie on the oldest member of each group that has none and adds
// it to chosen. The caller holds m.mu.
func (m *Manager) createMissing(live []found, chosen map[string]kernel.Cookie) (int, []error) {
	byAge := slices.Clone(live)
	slices.SortStableFunc(byAge, func(a, b found) int { return cmp.Compare(a.obs.Start, b.obs.Start) })
	created := 0
	var errs []error
	for _, f := range byAge {
		g := f.mem.Group.ID()
		if _, ok := chosen[g]; ok {
			continue
		}
		mem := f.mem
		c, err := m.join(&mem, f.pids)
		if err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", g, err))
			continue
		}
		chosen[g] = c
		f.holders[c] = mem.Pid
		created++
	}
	return created, errs
}
