package topology

import (
	"strings"

	"k8s.io/utils/cpuset"
)

// HostIsolation is what the kernel was told at boot to keep apart (isolcpus=, nohz_full=,
// rcu_nocbs=; see https://docs.kernel.org/admin-guide/kernel-parameters.html). Its sets hold
// present CPUs, online or not. The zero value is a host that isolates nothing.
type HostIsolation struct {
	// Domain CPUs are out of the scheduler's load balancing (isolcpus= without flags or with
	// domain): a task there is never migrated to an idle CPU, nor away from a busy one.
	Domain cpuset.CPUSet
	// NoHZFull CPUs stop their tick while one task runs (nohz_full=, isolcpus=nohz).
	NoHZFull cpuset.CPUSet
	// RCUNoCBs CPUs run no RCU callbacks (rcu_nocbs=, and every nohz_full CPU).
	RCUNoCBs cpuset.CPUSet
	// ManagedIRQ CPUs get no managed device interrupts while a housekeeping CPU can take
	// them (isolcpus=managed_irq).
	ManagedIRQ cpuset.CPUSet
	// Warnings are what was odd in the kernel command line or sysfs: for the operator, never
	// fatal (a node must start whatever its command line says).
	Warnings []string
}

// NoIsolation is a host that isolates nothing, its sets empty (not the zero CPUSet, which
// cpuset's Equals tells from an empty one).
func NoIsolation() HostIsolation {
	return HostIsolation{Domain: cpuset.New(), NoHZFull: cpuset.New(), RCUNoCBs: cpuset.New(), ManagedIRQ: cpuset.New()}
}

// Isolated returns the CPUs the host isolated in any way that keeps work off them: Domain,
// NoHZFull and ManagedIRQ (everything isolcpus= and nohz_full= name). rcu_nocbs= alone does
// not count: distributions set it for power saving on every CPU.
func (h HostIsolation) Isolated() cpuset.CPUSet {
	return h.Domain.Union(h.NoHZFull).Union(h.ManagedIRQ)
}

// Any reports whether the host isolated any CPU (rcu_nocbs= included).
func (h HostIsolation) Any() bool {
	return h.Isolated().Size() > 0 || h.RCUNoCBs.Size() > 0
}

// Summary is one line for people: "isolcpus domain 2-7 (not load balanced), nohz_full 2-7,
// rcu_nocbs 2-7, managed_irq 2-7", or "none".
func (h HostIsolation) Summary() string {
	return summary(h.Domain.String(), h.NoHZFull.String(), h.RCUNoCBs.String(), h.ManagedIRQ.String())
}

// summary is Summary of CPU lists ("" when none).
func summary(domain, nohzFull, rcuNoCBs, managedIRQ string) string {
	var parts []string
	for _, s := range []struct{ name, cpus string }{{"isolcpus domain", domain}, {"nohz_full", nohzFull},
		{"rcu_nocbs", rcuNoCBs}, {"managed_irq", managedIRQ}} {
		if s.cpus != "" {
			parts = append(parts, s.name+" "+s.cpus)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	if domain != "" {
		parts[0] += " (not load balanced)"
	}
	return strings.Join(parts, ", ")
}

// IsolationLists is HostIsolation's sets as JSON: Linux CPU lists, "" when none. (Its
// warnings go with the other warnings of a report.)
type IsolationLists struct {
	Domain     string `json:"domain,omitempty"`
	NoHZFull   string `json:"nohzFull,omitempty"`
	RCUNoCBs   string `json:"rcuNoCBs,omitempty"`
	ManagedIRQ string `json:"managedIRQ,omitempty"`
}

// Lists returns h's sets as CPU lists; nil when the host isolated nothing.
func (h HostIsolation) Lists() *IsolationLists {
	if !h.Any() {
		return nil
	}
	return &IsolationLists{Domain: h.Domain.String(), NoHZFull: h.NoHZFull.String(), RCUNoCBs: h.RCUNoCBs.String(),
		ManagedIRQ: h.ManagedIRQ.String()}
}

// Summary is HostIsolation.Summary of the lists ("none" for nil), for a report read back
// from JSON.
func (l *IsolationLists) Summary() string {
	if l == nil {
		return "none"
	}
	return summary(l.Domain, l.NoHZFull, l.RCUNoCBs, l.ManagedIRQ)
}
