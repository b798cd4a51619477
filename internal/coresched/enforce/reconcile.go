package enforce

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// Run runs the process-event watcher and the periodic reconcile until ctx ends, and returns
// once both have stopped. On a node that cannot make cookies it only retries a failed Group
// Identity guard at each period.
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Disabled {
		return nil
	}
	kick := make(chan struct{}, 1)
	var watcher sync.WaitGroup
	defer watcher.Wait() // it ends with ctx
	t := time.NewTicker(m.cfg.ReconcileEvery)
	defer t.Stop()
	started := false
	for {
		if err := m.Status().Err; err != nil {
			m.retryGuard(err)
		} else if !started {
			started = true
			watcher.Go(func() { m.watch(ctx, kick) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-kick:
		}
		if m.Status().Err != nil {
			continue
		}
		rep := m.reconcile(false)
		if rep.Repaired > 0 || len(rep.Errs) > 0 || rep.Exited > 0 {
			m.log.Info("core scheduling reconcile", "members", rep.Members, "tasks", rep.Tasks,
				"repaired", rep.Repaired, "exited", rep.Exited, "errors", errors.Join(rep.Errs...))
		}
	}
}

// retryGuard runs the guard again when it is what stopped cookies.
func (m *Manager) retryGuard(cause error) {
	if stateWithout(cause) != StateGuard {
		return
	}
	if err := m.guard(); err == nil {
		m.log.Info("core scheduling guard passes now; cookies will be made again")
		m.setUnusable(nil)
	}
}

// reconcileReport says what one reconcile pass saw and did.
type reconcileReport struct {
	Members  int // members with a cookie, checked
	Tasks    int // their tasks, read
	Repaired int // tasks given the cookie
	Exited   int // members without a process, forgotten
	Errs     []error
}

// target is a task to repair and the scope to repair it at.
type target struct {
	pid   int
	scope kernel.Scope
	tasks int
}

// reconcile reads the cookie of every task of every member with a cookie and gives the
// group's cookie to those that lack it: a whole process at once when none of its threads
// has it, else thread by thread. Members whose cgroup has no process left are forgotten.
func (m *Manager) reconcile(recovered bool) reconcileReport {
	m.mu.Lock()
	var ms []member
	want := map[string]kernel.Cookie{}
	for _, mem := range m.book.list() {
		if mem.State == StateOK {
			ms = append(ms, mem)
			want[mem.ID] = m.book.cookie(mem.Group)
		}
	}
	m.mu.Unlock()
	var rep reconcileReport
	for _, mem := range ms {
		pids, err := m.cg.procs(mem.Cgroup)
		if gone(err) || err == nil && len(pids) == 0 {
			m.log.Info("core scheduling member has no process left", "pod", mem.Pod, "container", mem.Name)
			m.forget(mem.ID)
			rep.Exited++
			continue
		}
		if err != nil {
			rep.Errs = append(rep.Errs, err)
			continue
		}
		rep.Members++
		for _, pid := range pids {
			ts, n := m.wrongTasks(pid, want[mem.ID])
			rep.Tasks += n
			for _, t := range ts {
				err := m.repair(mem.ID, want[mem.ID], t.pid, t.scope, m.k.Share)
				if err != nil {
					if !gone(err) && !errors.Is(err, errStale) {
						rep.Errs = append(rep.Errs, err)
					}
					continue
				}
				rep.Repaired += t.tasks
				m.met.repaired.WithLabelValues("reconcile").Add(float64(t.tasks))
				m.report(Repair{By: "reconcile", Member: mem.ID, Pid: t.pid, Scope: t.scope, Recovered: recovered})
			}
		}
	}
	return rep
}

// wrongTasks reads the cookie of each thread of process pid and returns what to repair
// (the process, or its wrong threads) and how many threads it read.
func (m *Manager) wrongTasks(pid int, want kernel.Cookie) ([]target, int) {
	if pid == m.self {
		return nil, 0
	}
	tids, err := m.proc.threads(pid)
	if err != nil {
		return nil, 0
	}
	var wrong []target
	for _, tid := range tids {
		if c, err := m.k.Get(tid); err == nil && c != want {
			wrong = append(wrong, target{pid: tid, scope: kernel.Thread, tasks: 1})
		}
	}
	switch len(wrong) {
	case 0:
		return nil, len(tids)
	case len(tids): // the whole process, and any thread it starts meanwhile
		return []target{{pid: pid, scope: kernel.Process, tasks: len(wrong)}}, len(tids)
	}
	return wrong, len(tids)
}

func (m *Manager) report(r Repair) {
	if m.cfg.OnRepair != nil {
		m.cfg.OnRepair(r)
	}
}
