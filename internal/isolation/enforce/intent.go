package enforce

import (
	"maps"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/isolation"
)

// The record is written ahead: before a CPU is taken out of interrupts or the workqueue mask,
// or a cgroup gets cpuset.cpus.exclusive, the record on disk names it (its intent), so that an
// agent killed at any point restarts knowing what it may have changed. CreateContainer widens
// the intent and the writer (Run) writes it, usually long before StartContainer; only if it has
// not yet does StartContainer write it itself (durableLocked). The baseline is refreshed when
// the intent first names CPUs: nothing is taken out then, the node's affinity is its own.

// wantsLocked is what the created and running containers may take out.
func (m *Manager) wantsLocked() (noIRQ, isolated cpuset.CPUSet, dirs []string) {
	all := m.heldLocked()
	for _, e := range m.created {
		all = append(all, e.held)
	}
	return isolation.NoIRQCPUs(all), isolation.IsolatedCPUs(all), slices.Sorted(maps.Keys(isolation.Exclusive(all)))
}

// noteLocked widens the record's intent to what the containers may take out.
func (m *Manager) noteLocked() {
	noIRQ, isolated, dirs := m.wantsLocked()
	if m.rec.NoIRQ.IsEmpty() && !noIRQ.IsEmpty() && m.cfg.ProcIRQ != "" && !m.restoreIRQ {
		m.refreshIRQBaseline()
	}
	if m.rec.Isolated.IsEmpty() && !isolated.IsEmpty() && m.cfg.Workqueue != "" && !m.restoreWQ {
		if c, err := m.wq.Get(); err == nil {
			m.rec.Workqueue, m.rec.HasWQ = c, true
		}
	}
	m.widen(noIRQ, isolated, dirs)
}

func (m *Manager) widen(noIRQ, isolated cpuset.CPUSet, dirs []string) {
	if u := m.rec.NoIRQ.Union(noIRQ); !u.Equals(m.rec.NoIRQ) {
		m.rec.NoIRQ, m.dirty = u, true
	}
	if u := m.rec.Isolated.Union(isolated); !u.Equals(m.rec.Isolated) {
		m.rec.Isolated, m.dirty = u, true
	}
	if u := union(m.rec.Exclusive, dirs); len(u) != len(m.rec.Exclusive) {
		m.rec.Exclusive, m.dirty = u, true
	}
	if m.dirty {
		m.kick()
	}
}

// durableLocked makes sure the record on disk names what applying held takes out.
func (m *Manager) durableLocked(held []isolation.Held) error {
	noIRQ, isolated := isolation.NoIRQCPUs(held), isolation.IsolatedCPUs(held)
	dirs := slices.Sorted(maps.Keys(isolation.Exclusive(held)))
	m.widen(noIRQ, isolated, dirs)
	d := m.disk
	if noIRQ.IsSubsetOf(d.NoIRQ) && isolated.IsSubsetOf(d.Isolated) && len(union(d.Exclusive, dirs)) == len(d.Exclusive) {
		return nil
	}
	rec := m.rec
	rec.Exclusive = slices.Clone(rec.Exclusive)
	if err := saveRecord(m.cfg.StateDir, rec); err != nil {
		return err
	}
	m.disk, m.dirty = rec, false
	return nil
}

// shrinkLocked narrows the intent, once applied, to what the containers may still take out.
func (m *Manager) shrinkLocked() {
	noIRQ, isolated, dirs := m.wantsLocked()
	noIRQ, isolated = noIRQ.Union(m.applied.noIRQ), isolated.Union(m.applied.isolated)
	if !noIRQ.Equals(m.rec.NoIRQ) || !isolated.Equals(m.rec.Isolated) || !slices.Equal(dirs, m.rec.Exclusive) {
		m.rec.NoIRQ, m.rec.Isolated, m.rec.Exclusive, m.dirty = noIRQ, isolated, dirs, true
	}
}

// union is the sorted union of two sets of paths.
func union(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	return slices.Sorted(maps.Keys(set))
}
