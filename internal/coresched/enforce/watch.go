package enforce

import (
	"context"
	"errors"
	"time"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/coresched/procevents"
)

// watch gives processes that appear in a member's cgroup (kubectl exec, runtime hooks)
// their group's cookie as the kernel reports their fork or exec. Lost events kick a
// reconcile.
func (m *Manager) watch(ctx context.Context, kick chan<- struct{}) {
	c, err := procevents.Open(2 * time.Second)
	if err != nil {
		m.log.Error("core scheduling: no process-event watcher; processes that enter containers later "+
			"get their cookie from the reconcile only (needs CONFIG_PROC_EVENTS, CAP_NET_ADMIN, host network and PID namespaces)",
			"every", m.cfg.ReconcileEvery, "err", err)
		return
	}
	m.setWatching(true)
	defer m.setWatching(false)
	go func() { <-ctx.Done(); c.Close() }()
	m.log.Info("core scheduling: watching process events")
	buf := make([]byte, 64<<10)
	for {
		evs, err := c.Read(buf)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, procevents.ErrLost):
			m.log.Warn("core scheduling: process events lost (socket buffer overrun); reconciling now")
			select {
			case kick <- struct{}{}:
			default:
			}
			continue
		case err != nil:
			m.log.Error("core scheduling: process-event watcher stopped", "err", err)
			return
		}
		for _, ev := range evs {
			m.handle(ev)
		}
	}
}

func (m *Manager) setWatching(on bool) {
	m.mu.Lock()
	m.watching = on
	m.mu.Unlock()
	m.met.watching.Set(map[bool]float64{true: 1}[on])
}

// handle checks the task of a fork or exec event: if it is in a member's cgroup and lacks
// the group's cookie, it gets it (a new thread alone, else the whole process).
func (m *Manager) handle(ev procevents.Event) {
	if ev.What != procevents.Fork && ev.What != procevents.Exec || ev.Tgid == m.self {
		return
	}
	b, err := m.proc.cgroupFile(ev.Pid)
	if err != nil {
		return
	}
	path, ok := m.cg.taskCgroup(b)
	if !ok {
		return
	}
	m.mu.Lock()
	mem, want, ok := m.book.inCgroup(path)
	m.mu.Unlock()
	if !ok || mem.State != StateOK || want == 0 {
		return
	}
	if c, err := m.k.Get(ev.Pid); err != nil || c == want {
		return
	}
	pid, scope := ev.Tgid, kernel.Process
	if ev.Thread() {
		pid, scope = ev.Pid, kernel.Thread
	}
	if err := m.repair(mem.ID, want, pid, scope); err != nil {
		if !gone(err) && !errors.Is(err, errStale) {
			m.log.Warn("core scheduling: watcher could not repair a task", "pod", mem.Pod, "container", mem.Name,
				"pid", pid, "err", err)
		}
		return
	}
	delay := time.Duration(procevents.Now() - int64(ev.Time))
	m.met.repaired.WithLabelValues("watcher").Inc()
	m.met.delay.WithLabelValues(ev.What.String()).Observe(delay.Seconds())
	m.report(Repair{By: "watcher", Member: mem.ID, Pid: pid, Scope: scope, Event: ev.What.String(), Delay: delay})
}
