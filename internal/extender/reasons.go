package extender

import (
	"fmt"
	"unicode/utf8"

	"github.com/podfence/podfence/internal/kube/nodeinfo"
)

// Bounds on a refusal reason, which a filter reply repeats for every refused node: the
// pod-specific parts are cut, so that a reply grows with the nodes, not with the pod.
const (
	maxReason      = 300 // bytes of a reason
	maxGroupInText = 100 // bytes of the group's name in a reason
)

// reasons are the refusal reasons for one pod, made once per request.
type reasons struct{ label, unknown, unsupported string }

func reasonsFor(p Pod, labelErr error) reasons {
	if labelErr != nil {
		return reasons{label: clip("podfence: "+labelErr.Error(), maxReason)}
	}
	g := clip(p.Group.String(), maxGroupInText)
	return reasons{
		unknown: fmt.Sprintf("podfence: pod asks for core-scheduling group %s; node has no %s label (no podfence agent has reported it)",
			g, nodeinfo.LabelCoreSched),
		unsupported: fmt.Sprintf("podfence: pod asks for core-scheduling group %s; node has %s=%s", g, nodeinfo.LabelCoreSched,
			nodeinfo.Unsupported),
	}
}

// of says why a node cannot run the pod ("" when it can): the pod's group labels are
// unusable, or it explicitly asks for a group (or exclusive) and the node has no core
// scheduling. Policy none and implicit groups pass everywhere.
func (r reasons) of(p Pod, labelErr error, n Facts) string {
	switch {
	case labelErr != nil:
		return r.label
	case !p.Group.Explicit() || p.Group.None():
		return ""
	case !n.Known:
		return r.unknown
	case !n.CoreSched:
		return r.unsupported
	}
	return ""
}

// clip cuts s to at most n bytes, "…" included, without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	const ellipsis = "…"
	if len(s) <= n {
		return s
	}
	n -= len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}
