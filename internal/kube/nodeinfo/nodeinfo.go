// Package nodeinfo publishes what the scheduler extender (package extender) needs to know
// about a node, on the node object itself, and reads it back:
//
//	label      podfence.io/core-sched=supported|unsupported   the agent can give tasks cookies
//	annotation podfence.io/physical-cores=<n>                   physical cores (SMT siblings count once)
//
// The agent writes both with a JSON merge patch on its Node (RBAC: patch on nodes), at
// start-up and whenever they change; it needs no other access to the API server. The patch
// is a plain REST call through the agent's kubeapi.Client, the one its Events use too: this
// package must not import client-go, whose weight in the agent's resident memory is out of
// its budget.
package nodeinfo

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Keys on the Node.
const (
	LabelCoreSched          = "podfence.io/core-sched"
	AnnotationPhysicalCores = "podfence.io/physical-cores"
)

// Values of LabelCoreSched.
const (
	Supported   = "supported"
	Unsupported = "unsupported"
)

// Info is what the agent publishes about its node.
type Info struct {
	CoreSched     bool // core scheduling works: cookies can be made
	PhysicalCores int  // 0: unknown (not published)
}

// MergePatch is the JSON merge patch (RFC 7386) that sets info on a Node.
func MergePatch(info Info) []byte {
	v := Unsupported
	if info.CoreSched {
		v = Supported
	}
	meta := map[string]any{"labels": map[string]string{LabelCoreSched: v}}
	if info.PhysicalCores > 0 {
		meta["annotations"] = map[string]string{AnnotationPhysicalCores: strconv.Itoa(info.PhysicalCores)}
	}
	b, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		panic(fmt.Sprintf("marshal node patch: %v", err)) // maps of strings always marshal
	}
	return b
}

// Read returns what a Node says; published is false when the agent has not labelled it.
// A malformed core count reads as 0 (unknown) and is reported in err.
func Read(n *corev1.Node) (info Info, published bool, err error) {
	v, ok := n.Labels[LabelCoreSched]
	if !ok {
		return Info{}, false, nil
	}
	info.CoreSched = v == Supported
	if s, ok := n.Annotations[AnnotationPhysicalCores]; ok {
		c, perr := strconv.Atoi(s)
		if perr != nil || c < 0 {
			return info, true, fmt.Errorf("node %s: annotation %s=%q: want a non-negative integer", n.Name, AnnotationPhysicalCores, s)
		}
		info.PhysicalCores = c
	}
	return info, true, nil
}
