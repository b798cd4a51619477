// Package coresched decides which pods may share SMT siblings: Linux core scheduling gives
// every task a cookie, and only tasks with the same cookie run on the two threads of one
// physical core at once (Documentation/admin-guide/hw-vuln/core-scheduling.rst). A Group is
// the set of pods whose containers share one cookie. GroupFor maps a pod to its group from
// its labels, the node policy and the groups the cluster operator shares; it is pure.
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
// A group name is namespaced (docs/tenancy.md): group X of a pod in namespace N is N's group
// X, whatever other namespaces call theirs, unless SharedGroups (the operator's profiles)
// share X among a set of namespaces that includes N. A pod author's label never reaches
// across namespaces.
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
	id       string // "" for no cookie; else "group:<ns>/<name>", "group:<name>", "ns:<ns>" or "pod:<uid>"
	explicit bool   // asked for by the pod's labels rather than by the node default
}

// ID names the group: "group:shop/web" (namespace shop's group web), "group:web" (group web
// the operator shares among namespaces), "ns:shop" (namespace default), "pod:<uid>"
// (exclusive); "" for no cookie. Neither names nor namespaces contain '/', so IDs of
// different groups differ.
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

// Request is what a pod's core-scheduling labels ask for: the policy and the group name,
// each with the label key it was read from (podfence's, or else Koordinator's alias).
type Request struct {
	PolicyKey, Policy string
	GroupKey, Group   string
}

// RequestOf reads a pod's core-scheduling labels and checks their values.
func RequestOf(labels map[string]string) (Request, error) {
	var r Request
	r.PolicyKey, r.Policy = label(labels, LabelPolicy, KoordLabelPolicy)
	r.GroupKey, r.Group = label(labels, LabelGroup, KoordLabelGroup)
	switch r.Policy {
	case PolicyExclusive, PolicyNone, PolicyDefault:
	default:
		return Request{}, &LabelError{Key: r.PolicyKey, Value: r.Policy,
			Err: fmt.Errorf("unknown policy (want %q, %q or empty)", PolicyExclusive, PolicyNone)}
	}
	if r.Policy == PolicyDefault {
		if err := checkName(r.Group); err != nil {
			return Request{}, &LabelError{Key: r.GroupKey, Value: r.Group, Err: err}
		}
	}
	return r, nil
}

// GroupFor returns pod's group; def groups pods without labels (ByNamespace when empty), and
// shared says which labelled groups span namespaces (the zero value: none). Whether the node
// can give the group a cookie is the caller's question: an Explicit group on a node without
// core scheduling is to be refused or reported.
func GroupFor(def DefaultGroup, shared SharedGroups, pod Pod) (Group, error) {
	r, err := RequestOf(pod.Labels)
	if err != nil {
		return Group{}, err
	}
	switch {
	case r.Policy == PolicyExclusive:
		return Group{id: "pod:" + pod.UID, explicit: true}, nil
	case r.Policy == PolicyNone:
		return Group{explicit: true}, nil
	case r.Group != "" && shared.Joins(r.Group, pod.Namespace):
		return Group{id: "group:" + r.Group, explicit: true}, nil
	case r.Group != "":
		return Group{id: "group:" + pod.Namespace + "/" + r.Group, explicit: true}, nil
	}
	switch def {
	case ByPod:
		return Group{id: "pod:" + pod.UID}, nil
	case NoGroup:
		return Group{}, nil
	}
	return Group{id: "ns:" + pod.Namespace}, nil
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
		if !alnum(r) && r != '-' && r != '_' && r != '.' {
			return fmt.Errorf("group name has the character %q (want letters, digits, '-', '_' or '.')", r)
		}
	}
	// As Kubernetes label values: a pod could not carry the name otherwise.
	if s != "" && (!alnum(rune(s[0])) || !alnum(rune(s[len(s)-1]))) {
		return fmt.Errorf("group name %q starts or ends with '-', '_' or '.' (want a letter or digit at both ends)", s)
	}
	return nil
}

func alnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' }
