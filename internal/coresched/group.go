// Package coresched decides which pods may share SMT siblings: Linux core scheduling gives
// every task a cookie, and only tasks with the same cookie run on the two threads of one
// physical core at once (Documentation/admin-guide/hw-vuln/core-scheduling.rst). A Group is
// the set of pods whose containers share one cookie. GroupFor maps a pod to its group from
// its labels and the node policy; it is pure.
//
// Labels (Koordinator's accepted as aliases; podfence's win when both are set):
//
//	podfence.io/core-sched-group   (koordinator.sh/core-sched-group-id)  a group name
//	podfence.io/core-sched-policy  (koordinator.sh/core-sched-policy)    "" | exclusive | none
//
// The policy overrides the group, as in Koordinator: "exclusive" puts the pod in a group of
// its own, "none" gives it cookie 0 (no core scheduling). Pods without labels get the node's
// default group: their namespace (default), the pod alone, or none.
//
// Manager is the agent side, an NRI extension: it gives a container's init process its
// group's cookie at StartContainer, before the entrypoint runs; tasks that enter later get
// theirs from the kernel's process events (package procevents) or a periodic reconcile; a
// restarted agent rebuilds its groups from the cookies live tasks carry. Its kernel calls go
// through Kernel (kernel.Prctl on a node, a fake in tests).
package coresched

import (
	"fmt"
	"strings"
)

// Pod labels that choose a pod's group.
const (
	LabelGroup       = "podfence.io/core-sched-group"
	LabelPolicy      = "podfence.io/core-sched-policy"
	KoordLabelGroup  = "koordinator.sh/core-sched-group-id"
	KoordLabelPolicy = "koordinator.sh/core-sched-policy"
)

// Policy values of the policy label.
const (
	PolicyDefault   = ""
	PolicyExclusive = "exclusive"
	PolicyNone      = "none"
)

// DefaultGroup is how a node groups pods that carry no label.
type DefaultGroup string

// Default groupings.
const (
	ByNamespace DefaultGroup = "namespace"
	ByPod       DefaultGroup = "pod"
	NoGroup     DefaultGroup = "none"
)

// ParseDefaultGroup checks a defaultGroup setting.
func ParseDefaultGroup(s string) (DefaultGroup, error) {
	switch d := DefaultGroup(s); d {
	case ByNamespace, ByPod, NoGroup:
		return d, nil
	case "":
		return ByNamespace, nil
	}
	return "", fmt.Errorf("defaultGroup %q: want namespace, pod or none", s)
}

// String, Set and Type make *DefaultGroup a command-line flag value (pflag.Value).
func (d DefaultGroup) String() string { return string(d) }

func (d *DefaultGroup) Set(s string) error {
	v, err := ParseDefaultGroup(s)
	if err == nil {
		*d = v
	}
	return err
}

func (*DefaultGroup) Type() string { return "namespace|pod|none" }

// Group is a set of pods that share one cookie. The zero Group is "no cookie" (cookie 0).
// Groups are values: compare them with ==.
type Group struct {
	id       string // "" for no cookie; else "group:<name>", "ns:<namespace>" or "pod:<uid>"
	explicit bool   // asked for by the pod's labels rather than by the node default
}

// ID names the group ("group:web", "ns:shop", "pod:<uid>"); "" for no cookie.
func (g Group) ID() string { return g.id }

// None reports whether the group means cookie 0.
func (g Group) None() bool { return g.id == "" }

// Explicit reports whether the pod's labels asked for it (so a node that cannot do core
// scheduling must refuse the pod under a strict policy).
func (g Group) Explicit() bool { return g.explicit }

func (g Group) String() string {
	if g.None() {
		return "none"
	}
	return g.id
}

// Pod is what GroupFor needs of a pod.
type Pod struct {
	UID       string
	Namespace string
	Labels    map[string]string
}

// LabelError is a pod label with a value podfence cannot use.
type LabelError struct {
	Key, Value string
	Err        error
}

func (e *LabelError) Error() string {
	return fmt.Sprintf("label %s=%q: %v", e.Key, e.Value, e.Err)
}

func (e *LabelError) Unwrap() error { return e.Err }

// GroupFor returns pod's group; def groups pods without labels (ByNamespace when empty).
// Whether the node can give the group a cookie is the caller's question: an Explicit group
// on a node without core scheduling is to be refused or reported.
func GroupFor(def DefaultGroup, pod Pod) (Group, error) {
	policyKey, policy := label(pod.Labels, LabelPolicy, KoordLabelPolicy)
	groupKey, group := label(pod.Labels, LabelGroup, KoordLabelGroup)
	var g Group
	switch policy {
	case PolicyExclusive:
		g = Group{id: "pod:" + pod.UID, explicit: true}
	case PolicyNone:
		g = Group{explicit: true}
	case PolicyDefault:
		if err := checkName(group); err != nil {
			return Group{}, &LabelError{Key: groupKey, Value: group, Err: err}
		}
		if group != "" {
			g = Group{id: "group:" + group, explicit: true}
			break
		}
		switch def {
		case ByPod:
			g = Group{id: "pod:" + pod.UID}
		case NoGroup:
			g = Group{}
		default:
			g = Group{id: "ns:" + pod.Namespace}
		}
	default:
		return Group{}, &LabelError{Key: policyKey, Value: policy,
			Err: fmt.Errorf("unknown policy (want %q, %q or empty)", PolicyExclusive, PolicyNone)}
	}
	return g, nil
}

// label returns the podfence label if set, else the Koordinator alias.
func label(labels map[string]string, key, alias string) (string, string) {
	if v, ok := labels[key]; ok {
		return key, strings.TrimSpace(v)
	}
	return alias, strings.TrimSpace(labels[alias])
}

// checkName accepts a group name usable as a label value.
func checkName(s string) error {
	if len(s) > 63 {
		return fmt.Errorf("group name is %d characters long (at most 63)", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("group name has the character %q (want letters, digits, '-', '_' or '.')", r)
		}
	}
	return nil
}
