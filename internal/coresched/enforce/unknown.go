package enforce

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// ReasonUnknownPolicy is the Event reason of a pod whose Koordinator policy label holds a
// value podfence reads as the default policy.
const ReasonUnknownPolicy = "UnknownCoreSchedPolicy"

// unknownRec is a pod sandbox with an unknown Koordinator policy value.
type unknownRec struct {
	pod   string // namespace/name
	value string
	group coresched.Group
}

// noteUnknown records and logs, once per pod sandbox, a Koordinator policy label podfence
// reads as the default policy, as koordlet does; Degraded lists it, so the agent posts one
// Event on the pod.
func (m *Manager) noteUnknown(pod *api.PodSandbox, g coresched.Group) {
	r, err := coresched.RequestOf(pod.GetLabels())
	if err != nil || r.UnknownPolicy == "" {
		return
	}
	m.mu.Lock()
	_, seen := m.unknown[pod.GetId()]
	m.unknown[pod.GetId()] = unknownRec{pod: podName(pod), value: r.UnknownPolicy, group: g}
	m.mu.Unlock()
	if !seen {
		m.log.Warn("unknown core-scheduling policy read as the default, as Koordinator does", "pod", podName(pod),
			"label", coresched.KoordLabelPolicy, "value", r.UnknownPolicy, "group", g.String())
	}
}

// unknownDegraded lists the pods with an unknown policy value, one pod-level entry each. The
// caller holds m.mu.
func (m *Manager) unknownDegraded() []nriplugin.Degraded {
	var out []nriplugin.Degraded
	for _, u := range m.unknown {
		ns, pod, _ := strings.Cut(u.pod, "/")
		out = append(out, nriplugin.Degraded{Namespace: ns, Pod: pod, Reason: ReasonUnknownPolicy,
			Message: fmt.Sprintf("label %s=%q is not a core-scheduling policy (want %q, %q or empty): read as empty, as "+
				"Koordinator does, so the pod is in core-scheduling group %s", coresched.KoordLabelPolicy, u.value,
				coresched.PolicyExclusive, coresched.PolicyNone, u.group)})
	}
	return out
}
