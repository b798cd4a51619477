package nriplugin

import (
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
)

// StateReporter is an extension that shows its part of the node's state in the agent's
// report (/state, `podfence status`), under its Name(). State must be safe to call at any
// time and return plain data that encodes to JSON.
type StateReporter interface {
	State() any
}

// DegradedReporter is an extension that runs some containers with less than they asked
// for (a best-effort policy on a node without support). Degraded lists them now; the agent
// reports each one as a Kubernetes Event once.
type DegradedReporter interface {
	Degraded() []Degraded
}

// Degraded is one container running with less isolation than asked, and why.
type Degraded struct {
	Namespace, Pod, Container string
	// Reason is short and CamelCase ("EPCLimitNotEnforced"); Message says what and why.
	Reason, Message string
}

// Snapshot returns the node layout and the allocations, consistent with each other.
func (a *Plugin) Snapshot() (*plan.Node, []allocation.Allocation) {
	a.mu.Lock()
	node, allocs := a.node.Load(), a.state.Unsorted()
	a.mu.Unlock()
	plan.SortAllocations(allocs) // outside the lock: handlers wait for the copy only
	return node, allocs
}

// ExtensionStates returns each StateReporter's state by extension name. A panicking
// State is left out, with an error logged.
func (a *Plugin) ExtensionStates() map[string]any {
	out := map[string]any{}
	for _, ext := range a.exts {
		r, ok := ext.(StateReporter)
		if !ok {
			continue
		}
		var s any
		if err := guard(ext, "State", func() error { s = r.State(); return nil }); err != nil {
			a.log.Error("extension failed", "event", "State", "extension", ext.Name(), "err", err)
			continue
		}
		out[ext.Name()] = s
	}
	return out
}

// Degraded returns what every DegradedReporter lists.
func (a *Plugin) Degraded() []Degraded {
	var out []Degraded
	for _, ext := range a.exts {
		r, ok := ext.(DegradedReporter)
		if !ok {
			continue
		}
		if err := guard(ext, "Degraded", func() error { out = append(out, r.Degraded()...); return nil }); err != nil {
			a.log.Error("extension failed", "event", "Degraded", "extension", ext.Name(), "err", err)
		}
	}
	return out
}
