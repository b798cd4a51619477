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
	for {
		// The reader keeps its own thread: it waits for events there and shares cookies
		// there (ShareHere), with no handoff between threads.
		again := make(chan bool, 1)
		kernel.OnOwnThread(func() { again <- m.read(ctx, c, kick, m.shareHere) })
		if !<-again {
			return
		}
		m.log.Warn("core scheduling: the watcher's thread kept a cookie; it ends, and the watcher goes on on a new thread")
	}
}

// read handles the events of c until ctx ends or the watcher stops (false), or until share
// leaves the thread with another cookie (true: go on on a new thread).
func (m *Manager) read(ctx context.Context, c *procevents.Conn, kick chan<- struct{}, share shareFunc) bool {
	buf := make([]byte, 64<<10)
	for {
		evs, err := c.Read(buf)
		switch {
		case ctx.Err() != nil:
			return false
		case errors.Is(err, procevents.ErrLost):
			m.log.Warn("core scheduling: process events lost (socket buffer overrun); reconciling now")
			select {
			case kick <- struct{}{}:
			default:
			}
			continue
		case err != nil:
			m.log.Error("core scheduling: process-event watcher stopped", "err", err)
			return false
		}
		for _, ev := range evs {
			if errors.Is(m.handle(ev, share), kernel.ErrThreadTainted) {
				return true
			}
		}
	}
}

// shareFunc gives the tasks of pid at scope the cookie of thread from (Kernel.Share).
type shareFunc func(from, pid int, scope kernel.Scope) error

// hereSharer is a Kernel that can share on the calling thread (kernel.Prctl).
type hereSharer interface {
	ShareHere(from, pid int, scope kernel.Scope) error
}

// shareHere shares on the calling thread, which must be locked and not the main one, when
// the kernel can; else through Share.
func (m *Manager) shareHere(from, pid int, scope kernel.Scope) error {
	if h, ok := m.k.(hereSharer); ok {
		return h.ShareHere(from, pid, scope)
	}
	return m.k.Share(from, pid, scope)
}

func (m *Manager) setWatching(on bool) {
	m.mu.Lock()
	m.watching = on
	m.mu.Unlock()
	m.met.watching.Set(map[bool]float64{true: 1}[on])
}

// handle checks the task of a fork or exec event: if it is in a member's cgroup and lacks
// the group's cookie, it gets it through share (a new thread alone, else the whole process).
// It returns the repair's error.
func (m *Manager) handle(ev procevents.Event, share shareFunc) error {
	if ev.What != procevents.Fork && ev.What != procevents.Exec || ev.Tgid == m.self {
		return nil
	}
	b, err := m.proc.cgroupFile(ev.Pid)
	if err != nil {
		return nil
	}
	path, ok := m.cg.taskCgroup(b)
	if !ok {
		return nil
	}
	m.mu.Lock()
	mem, want, ok := m.book.inCgroup(path)
	m.mu.Unlock()
	if !ok || mem.State != StateOK || want == 0 {
		return nil
	}
	if c, err := m.k.Get(ev.Pid); err != nil || c == want {
		return nil
	}
	pid, scope := ev.Tgid, kernel.Process
	if ev.Thread() {
		pid, scope = ev.Pid, kernel.Thread
	}
	if err := m.repair(mem.ID, want, pid, scope, share); err != nil {
		if !gone(err) && !errors.Is(err, errStale) {
			m.log.Warn("core scheduling: watcher could not repair a task", "pod", mem.Pod, "container", mem.Name,
				"pid", pid, "err", err)
		}
		return err
	}
	delay := time.Duration(procevents.Now() - int64(ev.Time))
	m.met.repaired.WithLabelValues("watcher").Inc()
	m.met.delay.WithLabelValues(ev.What.String()).Observe(delay.Seconds())
	m.report(Repair{By: "watcher", Member: mem.ID, Pid: pid, Scope: scope, Event: ev.What.String(), Delay: delay})
	return nil
}
