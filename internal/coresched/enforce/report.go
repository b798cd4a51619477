package enforce

import (
	"fmt"
	"strings"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/status"
)

var (
	_ nriplugin.StateReporter    = (*Manager)(nil)
	_ nriplugin.DegradedReporter = (*Manager)(nil)
)

// Report is the manager's section of the node report (status.SectionCoreSched): the
// node's support and each container's group and state. Pod sandboxes are left out.
type Report struct {
	Supported    bool                        `json:"supported"`
	Reason       string                      `json:"reason,omitempty"` // why no cookies can be made
	Policy       coresched.Policy            `json:"policy"`
	DefaultGroup coresched.DefaultGroup      `json:"defaultGroup"`
	SharedGroups map[string][]string         `json:"sharedGroups,omitempty"` // group → namespaces ("*": every one)
	Watching     bool                        `json:"watching"`               // the process-event watcher is subscribed
	Groups       int                         `json:"groups"`                 // groups with a cookie
	Containers   []status.CoreSchedContainer `json:"containers,omitempty"`
	// QoS are the knobs per Koordinator QoS class ("none": the label is not read).
	QoS string `json:"qos"`
	// CPUIdle is whether this node has cpu.idle, and the pods whose class asks for it.
	CPUIdle IdleReport `json:"cpuIdle"`
}

// IdleReport is the cpu.idle part of Report.
type IdleReport struct {
	Supported bool   `json:"supported"`
	Reason    string `json:"reason,omitempty"` // why not
	Set       int    `json:"set"`              // pods whose cgroup has cpu.idle=1
	Failed    int    `json:"failed"`           // pods whose class asks for it, without it
}

// State reports the manager for /state and `podfence status`.
func (m *Manager) State() any {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Report{Supported: m.unusable == nil, Policy: m.cfg.Policy, DefaultGroup: m.cfg.DefaultGroup,
		SharedGroups: m.cfg.Shared.Map(), Watching: m.watching, Groups: len(m.book.groups)}
	if m.unusable != nil {
		s.Reason = m.unusable.Error()
	}
	s.QoS, s.CPUIdle.Supported = m.cfg.QoS.String(), m.idleErr == nil
	if m.idleErr != nil {
		s.CPUIdle.Reason = m.idleErr.Error()
	}
	for _, r := range m.idle {
		if r.err == nil {
			s.CPUIdle.Set++
		} else {
			s.CPUIdle.Failed++
		}
	}
	for _, mem := range m.book.list() {
		if mem.Name == "" {
			continue
		}
		ns, pod, _ := strings.Cut(mem.Pod, "/")
		s.Containers = append(s.Containers, status.CoreSchedContainer{Namespace: ns, Pod: pod, Container: mem.Name,
			Group: mem.Group.String(), State: string(mem.State)})
	}
	return s
}

// Degraded lists the containers that run without the cookie they should carry (an explicit
// group on a node that cannot make cookies under best-effort, or a kernel call that failed),
// pods whose QoS class asks for cpu.idle without it, and pods whose Koordinator policy label
// is read as the default. Pod-level entries name no container.
func (m *Manager) Degraded() []nriplugin.Degraded {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.unknownDegraded()
	for _, r := range m.idle {
		if r.err == nil {
			continue
		}
		ns, pod, _ := strings.Cut(r.pod, "/")
		out = append(out, nriplugin.Degraded{Namespace: ns, Pod: pod, Reason: "CPUIdleNotSet",
			Message: fmt.Sprintf("the pod's QoS class asks for cpu.idle=1, which is not set: %v", r.err)})
	}
	for _, mem := range m.book.list() {
		var why string
		switch {
		case mem.Name == "":
			continue
		case mem.State == StateFailed:
			why = "a kernel call failed when it started (see the agent's log); the reconcile does not retry it"
		case mem.Group.Explicit() && (mem.State == StateUnsupported || mem.State == StateGuard):
			why = fmt.Sprintf("the node cannot make cookies: %v; policy %s runs the container without one", m.unusable, m.cfg.Policy)
		default:
			continue
		}
		ns, pod, _ := strings.Cut(mem.Pod, "/")
		out = append(out, nriplugin.Degraded{Namespace: ns, Pod: pod, Container: mem.Name, Reason: "CoreSchedulingNotEnforced",
			Message: fmt.Sprintf("core-scheduling group %s is not enforced: %s", mem.Group, why)})
	}
	return out
}
