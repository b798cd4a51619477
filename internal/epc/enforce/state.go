package enforce

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/status"
)

var (
	_ nriplugin.StateReporter    = (*Extension)(nil)
	_ nriplugin.DegradedReporter = (*Extension)(nil)
)

// State is the extension's part of the node report (status.SectionEPC): the node's
// support and, per container it tracks, the limit, whether it is in force and misc.current
// read now.
func (x *Extension) State() any {
	s := status.EPC{Supported: x.cap.Node.Supported, Reason: x.cap.Node.Reason, Policy: x.policy.String(),
		CapacityBytes: x.cap.Capacity}
	for _, e := range x.newest() {
		c := status.EPCContainer{Namespace: e.namespace, Pod: e.pod, Container: e.container,
			LimitBytes: e.limit.Bytes(), InForce: e.inForce}
		if x.cap.Node.Supported && e.dir != "" {
			if v, ok := x.value(e.dir, "misc.current", epc.Resource); ok {
				c.UsageBytes = &v
			}
		}
		s.Containers = append(s.Containers, c)
	}
	return s
}

// Degraded lists the containers whose limit is not in force: best-effort on a node without
// support, or a cap found missing at start.
func (x *Extension) Degraded() []nriplugin.Degraded {
	var out []nriplugin.Degraded
	for _, e := range x.newest() {
		if !e.unenforced() {
			continue
		}
		why := "it was not in force when the container started (see the agent's log)"
		if !x.cap.Node.Supported {
			why = fmt.Sprintf("the node cannot enforce it: %s; policy %s runs the container uncapped", x.cap.Node.Reason, x.policy)
		}
		out = append(out, nriplugin.Degraded{Namespace: e.namespace, Pod: e.pod, Container: e.container,
			Reason: "EPCLimitNotEnforced", Message: fmt.Sprintf("SGX EPC limit %s bytes is not enforced: %s", e.limit, why)})
	}
	return out
}

// newest returns a copy of the newest entry of each container (by namespace, pod and name),
// in that order.
func (x *Extension) newest() []entry {
	x.mu.Lock()
	byName := map[[3]string]entry{}
	for _, e := range x.ctrs {
		k := [3]string{e.namespace, e.pod, e.container}
		if old, ok := byName[k]; !ok || e.seq > old.seq {
			byName[k] = *e
		}
	}
	x.mu.Unlock()
	out := make([]entry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.pod, b.pod), cmp.Compare(a.container, b.container))
	})
	return out
}
