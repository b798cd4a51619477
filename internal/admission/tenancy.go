package admission

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// SharedGroups returns the core-scheduling groups the profiles share across namespaces:
// each profile's group (its policy empty) with its namespaces, every namespace when it lists
// none. The agent reads the same profiles for the same answer (docs/tenancy.md).
func SharedGroups(profiles []Profile) coresched.SharedGroups {
	var s coresched.SharedGroups
	for _, p := range profiles {
		if p.Group != "" && p.Policy == coresched.PolicyDefault {
			s.Share(p.Group, p.Namespaces...)
		}
	}
	return s
}

// checkTenancy refuses core-scheduling labels that reach past the pod's trust boundary
// (docs/tenancy.md); the labels' values are valid. When a profile selects the pod, the
// operator chose its group or policy: the pod's labels must say the same, or ask for policy
// exclusive. Otherwise a group the profiles share is open only to their namespaces.
func checkTenancy(pod *corev1.Pod, cfg *Config) error {
	if cfg == nil {
		return nil
	}
	r, err := coresched.RequestOf(pod.Labels)
	if err != nil {
		return nil // refused as a bad value
	}
	if i, p, ok := firstProfile(cfg, pod); ok {
		return checkProfile(pod.Labels, r, i, p)
	}
	if r.Policy != coresched.PolicyDefault || r.Group == "" {
		return nil
	}
	shared := SharedGroups(cfg.Profiles)
	namespaces, _, ok := shared.Sharers(r.Group)
	if !ok || shared.Joins(r.Group, pod.Namespace) {
		return nil
	}
	return fmt.Errorf("label %s=%q: namespace %q may not join core-scheduling group %s, which the core-scheduling profiles share "+
		"among namespaces %s only (a group name is its namespace's unless a profile shares it: choose another name, or ask the "+
		"cluster operator to add %s to that profile)", r.GroupKey, r.Group, pod.Namespace, r.Group, strings.Join(namespaces, ", "),
		pod.Namespace)
}

// checkProfile refuses labels that contradict profile i, p, which selects the pod: a
// different group or policy, except exclusive, which only narrows who shares the pod's cores.
// A pod without core-scheduling labels contradicts nothing: the mutation did not run (the
// profiles' webhook entry fails open), and the node gives it its default group.
func checkProfile(labels map[string]string, r coresched.Request, i int, p Profile) error {
	want := effect{policy: p.Policy, group: p.Group}
	got := effect{policy: r.Policy, group: r.Group}
	if !hasCoreSchedLabel(labels) || got.policy == coresched.PolicyExclusive || want.norm() == got.norm() {
		return nil
	}
	key, value := r.PolicyKey, r.Policy // the label that decides, one the pod has
	if r.UnknownPolicy != "" {
		value = r.UnknownPolicy
	}
	if _, has := labels[r.GroupKey]; r.Policy == coresched.PolicyDefault && has {
		key, value = r.GroupKey, r.Group
	}
	return fmt.Errorf("label %s=%q: core-scheduling profile %d%s selects this pod and gives it %s; a pod's own labels may only "+
		"repeat that or ask for policy exclusive (remove the label to take the profile's)", key, value, i, nameSuffix(p.Name),
		want.norm())
}

// effect is what a policy and a group come to.
type effect struct{ policy, group string }

// norm describes the effect: the policy overrides the group.
func (e effect) norm() string {
	switch {
	case e.policy != coresched.PolicyDefault:
		return "policy " + e.policy
	case e.group != "":
		return "group " + e.group
	}
	return "its namespace's default group"
}

// firstProfile returns the first profile that selects pod, and its index.
func firstProfile(cfg *Config, pod *corev1.Pod) (int, Profile, bool) {
	if cfg == nil {
		return 0, Profile{}, false
	}
	for i, p := range cfg.Profiles {
		if p.matches(pod.Namespace, pod.Labels) {
			return i, p, true
		}
	}
	return 0, Profile{}, false
}
