package enforce

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/status"
)

// Report is the isolation section of the node report (/state, `podfence status`).
type Report = status.Isolation

// Container is one running container that wants isolation, in the Report.
type Container = status.IsolationContainer

// State returns the Report (nriplugin.StateReporter).
func (m *Manager) State() any {
	ok, why := m.parts.Support()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Report{NoIRQCPUs: m.applied.noIRQ.String(), IRQError: m.irqErr, IRQBalance: m.balancer, Partitions: ok,
		PartitionsReason: why, IsolatedCPUs: m.applied.isolated.String(), WorkqueueError: m.wqErr}
	for n := range m.unmovable {
		r.UnmovableIRQs = append(r.UnmovableIRQs, n)
	}
	slices.Sort(r.UnmovableIRQs)
	for _, e := range m.running {
		r.Containers = append(r.Containers, Container{Namespace: e.namespace, Pod: e.pod, Container: e.name,
			CPUs: e.held.CPUs.String(), NoIRQs: e.held.Want.NoIRQs, NoLoadBalance: e.held.Want.NoLoadBalance,
			Partition: e.partition, Degraded: slices.Clone(e.why)})
	}
	slices.SortFunc(r.Containers, func(a, b Container) int {
		return strings.Compare(a.Namespace+"/"+a.Pod+"/"+a.Container, b.Namespace+"/"+b.Pod+"/"+b.Container)
	})
	return r
}

// Degraded lists the running containers that lack some of the isolation they asked for
// (nriplugin.DegradedReporter): the agent posts an Event on each pod once.
func (m *Manager) Degraded() []nriplugin.Degraded {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []nriplugin.Degraded
	for _, e := range m.running {
		if len(e.why) > 0 {
			out = append(out, nriplugin.Degraded{Namespace: e.namespace, Pod: e.pod, Container: e.name,
				Reason: "IsolationDegraded", Message: "exclusive CPUs " + e.held.CPUs.String() + " run with less isolation than " +
					"asked: " + strings.Join(e.why, "; ")})
		}
	}
	return out
}

// Run writes the record whenever it changed (never inside an NRI event) and every interval
// applies the state again: an IRQ that appeared since (a device added) is taken off the
// held CPUs too. It returns when ctx ends, after a last write.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.Flush()
			return
		case <-t.C:
			m.mu.Lock()
			if err := m.recheckLocked(); err != nil {
				m.log.Debug("isolation: periodic apply", "err", err)
			}
			m.mu.Unlock()
		case <-m.written:
		}
		m.Flush()
	}
}

// Flush writes the record if it changed.
func (m *Manager) Flush() {
	m.mu.Lock()
	if !m.dirty {
		m.mu.Unlock()
		return
	}
	rec := m.rec
	rec.Exclusive = slices.Clone(rec.Exclusive)
	m.dirty = false
	m.mu.Unlock()
	err := saveRecord(m.cfg.StateDir, rec)
	m.mu.Lock()
	if err != nil {
		m.log.Error("isolation record not written", "err", err)
		m.dirty = true
	} else {
		m.disk = rec
	}
	m.mu.Unlock()
}

// kick asks Run to write the record soon.
func (m *Manager) kick() {
	select {
	case m.written <- struct{}{}:
	default:
	}
}

var (
	descNoIRQ = prometheus.NewDesc("podfence_isolation_irq_excluded_cpus",
		"CPUs no movable device interrupt is delivered to (the exclusive CPUs of running containers that asked).", nil, nil)
	descIsolated = prometheus.NewDesc("podfence_isolation_partition_cpus",
		"CPUs of isolated cpuset partitions (no load balancing, kept off the unbound workqueues).", nil, nil)
	descUnmovable = prometheus.NewDesc("podfence_isolation_unmovable_irqs",
		"Interrupts the kernel does not let move (managed or per-CPU), seen while taking CPUs out of interrupt affinity.", nil, nil)
	descContainers = prometheus.NewDesc("podfence_isolation_containers",
		"Running containers that asked for isolation beyond the cpuset, by state: ok, or degraded (they lack some of it).",
		[]string{"state"}, nil)
)

// Collector reports the isolation metrics.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNoIRQ, descIsolated, descUnmovable, descContainers} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	noIRQ, isolated, unmovable := m.applied.noIRQ.Size(), m.applied.isolated.Size(), len(m.unmovable)
	var ok, degraded int
	for _, e := range m.running {
		if len(e.why) > 0 {
			degraded++
		} else {
			ok++
		}
	}
	m.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descNoIRQ, prometheus.GaugeValue, float64(noIRQ))
	ch <- prometheus.MustNewConstMetric(descIsolated, prometheus.GaugeValue, float64(isolated))
	ch <- prometheus.MustNewConstMetric(descUnmovable, prometheus.GaugeValue, float64(unmovable))
	ch <- prometheus.MustNewConstMetric(descContainers, prometheus.GaugeValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(descContainers, prometheus.GaugeValue, float64(degraded), "degraded")
}
