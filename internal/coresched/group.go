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
// its own, "none" gives it cookie 0 (no core scheduling). Koordinator's policy label with any
// other value reads as empty, as Koordinator reads it (Request.UnknownPolicy keeps the value
// for a warning); podfence's own label with one is refused. Pods without labels get the
// node's default group: their namespace (default), the pod alone, one group for the node
// (Koordinator's grouping), or none.
//
// Koordinator's QoS label koordinator.sh/qosClass selects the operator's per-class knobs
// (QoSRules, qos.go): core scheduling on or off, a separate cookie for expeller classes, and
// cpu.idle for the pod's cgroup.
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
	// KoordLabelQoS is Koordinator's QoS class label (LSE, LSR, LS, BE, SYSTEM).
	KoordLabelQoS = "koordinator.sh/qosClass"
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
	// ByNode puts every unlabelled pod of the node, of any namespace, in one group: the
	// grouping of Koordinator's koordlet (group id ""). It is the operator's choice, by flag;
	// no label of a pod's can ask for it (docs/tenancy.md).
	ByNode  DefaultGroup = "node"
	NoGroup DefaultGroup = "none"
)

// ParseDefaultGroup checks a defaultGroup setting.
func ParseDefaultGroup(s string) (DefaultGroup, error) {
	switch d := DefaultGroup(s); d {
	case ByNamespace, ByPod, ByNode, NoGroup:
		return d, nil
	case "":
		return ByNamespace, nil
	}
	return "", fmt.Errorf("defaultGroup %q: want namespace, pod, node or none", s)
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

func (*DefaultGroup) Type() string { return "namespace|pod|node|none" }

// Group is a set of pods that share one cookie. The zero Group is "no cookie" (cookie 0).
// Groups are values: compare them with ==.
type Group struct {
	id       string // "" for no cookie; else "group:<ns>/<name>", "group:<name>", "ns:<ns>", "pod:<uid>" or "node", each maybe + ExpellerSuffix
	explicit bool   // asked for by the pod's labels rather than by the node default
}

// ID names the group: "group:shop/web" (namespace shop's group web), "group:web" (group web
// the operator shares among namespaces), "ns:shop" (namespace default), "pod:<uid>"
// (exclusive), "node" (the node-wide default); "" for no cookie. Pods of an expeller QoS
// class get the ID with ExpellerSuffix ("group:shop/web#expeller"). Neither names nor
// namespaces contain '/' or '#', so IDs of different groups differ.
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
	// UnknownPolicy is the value of Koordinator's policy label when it is none of its
	// policies: Policy is then PolicyDefault, as koordlet reads it. Callers warn.
	UnknownPolicy string
}

// RequestOf reads a pod's core-scheduling labels and checks their values. An unknown value
// of podfence's policy label is an error; of Koordinator's, it reads as the default policy
// (Request.UnknownPolicy).
func RequestOf(labels map[string]string) (Request, error) {
	var r Request
	r.PolicyKey, r.Policy = label(labels, LabelPolicy, KoordLabelPolicy)
	r.GroupKey, r.Group = label(labels, LabelGroup, KoordLabelGroup)
	switch {
	case r.Policy == PolicyExclusive || r.Policy == PolicyNone || r.Policy == PolicyDefault:
	case r.PolicyKey == KoordLabelPolicy: // read as koordlet reads it
		r.Policy, r.UnknownPolicy = PolicyDefault, r.Policy
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

// ExpellerSuffix ends the ID of a group's part whose pods are of an expeller QoS class.
const ExpellerSuffix = "#expeller"

// Rules are a node's grouping rules: the default group of pods without labels (ByNamespace
// when empty), the labelled groups that span namespaces (the zero value: none) and the
// knobs per QoS class (the zero value: the QoS label is not read).
type Rules struct {
	Default DefaultGroup
	Shared  SharedGroups
	QoS     QoSRules
}

// GroupFor returns pod's group under the default grouping def and the shared groups, with
// no QoS knobs (Rules.GroupOf).
func GroupFor(def DefaultGroup, shared SharedGroups, pod Pod) (Group, error) {
	return Rules{Default: def, Shared: shared}.GroupOf(pod)
}

// GroupOf returns pod's group. A QoS class whose knobs turn core scheduling off gives no
// cookie whatever the labels ask (as koordlet does); an expeller class gives the pod's
// group a part of its own, which its pods of other classes do not join. Whether the node
// can give the group a cookie is the caller's question: an Explicit group on a node without
// core scheduling is to be refused or reported.
func (ru Rules) GroupOf(pod Pod) (Group, error) {
	r, err := RequestOf(pod.Labels)
	if err != nil {
		return Group{}, err
	}
	k, _ := ru.QoS.For(pod.Labels)
	if k.Off {
		return Group{}, nil
	}
	g := ru.group(r, pod)
	if k.Expeller && !g.None() {
		g.id += ExpellerSuffix
	}
	return g, nil
}

// group maps a checked request to its group, before the QoS knobs.
func (ru Rules) group(r Request, pod Pod) Group {
	switch {
	case r.Policy == PolicyExclusive:
		return Group{id: "pod:" + pod.UID, explicit: true}
	case r.Policy == PolicyNone:
		return Group{explicit: true}
	case r.Group != "" && ru.Shared.Joins(r.Group, pod.Namespace):
		return Group{id: "group:" + r.Group, explicit: true}
	case r.Group != "":
		return Group{id: "group:" + pod.Namespace + "/" + r.Group, explicit: true}
	}
	switch ru.Default {
	case ByPod:
		return Group{id: "pod:" + pod.UID}
	case ByNode:
		return Group{id: "node"}
	case NoGroup:
		return Group{}
	}
	return Group{id: "ns:" + pod.Namespace}
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
