package enforce

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/isolation"
)

// applyIRQs gives every IRQ and the default affinity the record's baseline without off (the
// baseline was refreshed when the record's intent first named CPUs: intent.go); an IRQ first
// seen later joins it as it is then.
func (m *Manager) applyIRQs(online, off cpuset.CPUSet) error {
	if m.applied.noIRQ.IsEmpty() && off.IsEmpty() && !m.restoreIRQ {
		return nil // nothing taken out, nothing to give back: the node's affinity is its own
	}
	irqs, err := m.irq.IRQs()
	if err != nil {
		m.irqErr = err.Error()
		return err
	}
	for _, n := range irqs {
		if _, ok := m.rec.IRQs[n]; !ok {
			if c, err := m.irq.Affinity(n); err == nil {
				m.rec.IRQs[n] = c
				m.dirty = true
			}
		}
	}
	want := isolation.PlanIRQs(m.rec.baseline(), online, off)
	var errs []error
	m.irqErr = ""
	for _, n := range irqs {
		w, ok := want.IRQs[n]
		if !ok || m.unmovable[n] != "" {
			continue
		}
		if cur, err := m.irq.Affinity(n); err == nil && cur.Equals(w) {
			continue
		}
		err := m.irq.SetAffinity(n, w)
		switch {
		case err == nil:
		case errors.Is(err, ErrUnmovable):
			m.unmovable[n] = "managed or per-CPU"
			m.log.Info("isolation: the kernel does not let this interrupt move; it is reported, not retried", "irq", n,
				"affinity", m.rec.IRQs[n].String())
		case errors.Is(err, ErrNotWritable) && errors.Is(err, syscall.EROFS):
			m.irqErr = err.Error()
			m.setNoIRQ(off.Union(m.applied.noIRQ))
			return err // a read-only mount: every other write fails the same way
		default:
			errs = append(errs, err)
		}
	}
	if cur, err := m.irq.Default(); err != nil || !cur.Equals(want.Default) {
		if err := m.irq.SetDefault(want.Default); err != nil {
			errs = append(errs, err)
		}
	}
	// What may be out now: off, and what was out before if some write failed.
	if len(errs) > 0 {
		m.setNoIRQ(off.Union(m.applied.noIRQ))
	} else {
		m.setNoIRQ(off)
	}
	if want.Housekeeping.IsEmpty() && !off.IsEmpty() {
		errs = append(errs, fmt.Errorf("interrupts: CPUs %s are every online CPU: none left to take interrupts", off))
	}
	if err := errors.Join(errs...); err != nil {
		m.irqErr = err.Error()
		return err
	}
	return nil
}

// refreshIRQBaseline takes the node's affinity now as the baseline.
func (m *Manager) refreshIRQBaseline() {
	irqs, err := m.irq.IRQs()
	if err != nil {
		return
	}
	fresh := map[int]cpuset.CPUSet{}
	for _, n := range irqs {
		if c, err := m.irq.Affinity(n); err == nil {
			fresh[n] = c
		}
	}
	m.rec.IRQs = fresh
	if d, err := m.irq.Default(); err == nil {
		m.rec.Default = d
	}
	m.dirty = true
}

func (m *Manager) setNoIRQ(off cpuset.CPUSet) { m.applied.noIRQ = off }

// applyWorkqueue gives the unbound-workqueue cpumask its baseline without the isolated CPUs.
func (m *Manager) applyWorkqueue(online, isolated cpuset.CPUSet) error {
	if m.applied.isolated.IsEmpty() && isolated.IsEmpty() && !m.restoreWQ {
		return nil
	}
	if !m.rec.HasWQ {
		m.wqErr = "its cpumask was not readable when the first CPUs were isolated"
		return errors.New("workqueue cpumask: " + m.wqErr)
	}
	want := m.rec.Workqueue.Difference(isolated).Intersection(online)
	if want.IsEmpty() {
		want = online.Difference(isolated)
	}
	m.wqErr = ""
	if want.IsEmpty() {
		m.wqErr = "every online CPU is isolated: the unbound workqueues keep their cpumask"
		return errors.New("workqueue cpumask: " + m.wqErr)
	}
	if cur, err := m.wq.Get(); err != nil || !cur.Equals(want) {
		if err := m.wq.Set(want); err != nil {
			m.wqErr = err.Error()
			return err
		}
	}
	return nil
}

// applyPartitions sets cpuset.cpus.exclusive down each isolated container's lineage (a
// remote partition), makes its cgroup an isolated partition, and clears what no running
// container needs any more. Shrinking goes bottom-up, growing top-down: a cgroup's exclusive
// CPUs stay within its parent's.
func (m *Manager) applyPartitions(held []isolation.Held) error {
	want := isolation.Exclusive(held)
	dirs := map[string]bool{}
	for _, d := range m.rec.Exclusive {
		dirs[d] = true
	}
	for d := range want {
		dirs[d] = true
	}
	all := slices.Collect(maps.Keys(dirs))
	var errs []error
	cur := map[string]cpuset.CPUSet{}
	for _, d := range isolation.BottomUp(all) {
		c, err := m.parts.Exclusive(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cur[d] = c
		if keep := c.Intersection(want[d]); !keep.Equals(c) {
			if err := m.parts.SetExclusive(d, keep); err != nil {
				errs = append(errs, err)
			}
			cur[d] = keep
		}
	}
	for _, d := range isolation.TopDown(all) {
		if w, ok := want[d]; ok && !w.Equals(cur[d]) {
			if err := m.parts.SetExclusive(d, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, e := range m.running {
		if !e.held.Want.NoLoadBalance || e.held.Cgroup == "" {
			continue
		}
		st, err := m.parts.State(e.held.Cgroup)
		if err == nil && st != Isolated && !strings.HasPrefix(st, Isolated+" ") {
			err = m.parts.SetState(e.held.Cgroup, Isolated)
			if err == nil {
				st, err = m.parts.State(e.held.Cgroup)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		e.partition = st
	}
	return errors.Join(errs...)
}

// recheckLocked is the periodic pass: IRQs that appeared since are taken off the held CPUs
// too. Interrupts moved back onto them are given their affinity again, unless an irqbalance
// runs: podfence does not fight it, it reports it (ban the CPUs in its configuration).
func (m *Manager) recheckLocked() error {
	m.balancer = ""
	off := m.applied.noIRQ
	if m.cfg.ProcIRQ == "" || off.IsEmpty() || m.cfg.Proc == "" {
		return m.applyLocked()
	}
	pid := findProcess(m.cfg.Proc, "irqbalance")
	if pid == 0 {
		return m.applyLocked()
	}
	irqs, err := m.irq.IRQs()
	if err != nil {
		return err
	}
	var back []int
	for _, n := range irqs {
		if c, err := m.irq.Affinity(n); err == nil && m.unmovable[n] == "" && c.Intersection(off).Size() > 0 {
			back = append(back, n)
		}
	}
	m.balancer = fmt.Sprintf("irqbalance (pid %d) runs", pid)
	if len(back) > 0 {
		m.balancer += fmt.Sprintf(" and moved interrupts %s back onto CPUs %s: podfence does not fight it; ban the "+
			"exclusive CPUs in its IRQBALANCE_BANNED_CPULIST", intList(back), off)
	}
	m.refreshWhy()
	return nil
}

// refreshWhy says, for each running container, what it lacks of what it asked.
func (m *Manager) refreshWhy() {
	partsOK, partsWhy := m.parts.Support()
	for _, e := range m.running {
		var why []string
		w := e.held.Want
		if w.NoIRQs {
			switch {
			case m.cfg.ProcIRQ == "":
				why = append(why, "interrupts: /proc/irq is not given to the agent")
			case m.irqErr != "":
				why = append(why, "interrupts: "+m.irqErr)
			}
			if strings.Contains(m.balancer, "moved") {
				why = append(why, "interrupts: "+m.balancer)
			}
			if stuck := m.stuckIRQs(e.held.CPUs); len(stuck) > 0 {
				why = append(why, fmt.Sprintf("interrupts %s: the kernel does not let them move off CPUs %s", intList(stuck), e.held.CPUs))
			}
		}
		if w.NoLoadBalance {
			switch {
			case !partsOK:
				why = append(why, "load balancing: "+partsWhy)
			default:
				if ok, reason := Valid(e.partition); !ok {
					why = append(why, "load balancing: partition not isolated: "+reason)
				}
			}
			if m.cfg.Workqueue != "" && m.wqErr != "" {
				why = append(why, "workqueues: "+m.wqErr)
			}
		}
		e.why = why
	}
}

// stuckIRQs are the unmovable IRQs delivered to cpus now.
func (m *Manager) stuckIRQs(cpus cpuset.CPUSet) []int {
	var out []int
	for n := range m.unmovable {
		if eff, err := m.irq.Effective(n); err == nil && eff.Intersection(cpus).Size() > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func intList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ",")
}
