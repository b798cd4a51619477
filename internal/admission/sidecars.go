package admission

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/podapi"
)

// noSidecar is why a pod carries no sidecars annotation though it asks for a pool.
const noSidecar = "the pod has no native sidecar (init container with restartPolicy Always)"

// sidecarsValue is the podfence.io/sidecars annotation the pod calls for: its native sidecars
// (init containers with restartPolicy Always), in spec order, when a container asks for a
// pool or uses a DRA claim (whose grant may give CPUs); false with the reason when it calls
// for none. The agent keeps what a sidecar holds when it exits, for its restart (the
// kubelet's CPU and device managers never give it to a container that follows).
func sidecarsValue(pod *corev1.Pod, reqs map[string]poolRequest) (string, bool, string) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			names = append(names, c.Name)
		}
	}
	claims := slices.ContainsFunc(containers(pod), func(c container) bool { return len(c.Resources.Claims) > 0 })
	if _, asks := cpuPoolsValue(reqs); !asks && !claims {
		return "", false, "no container asks for a pool resource or uses a DRA claim"
	}
	if len(names) == 0 {
		return "", false, noSidecar
	}
	return strings.Join(names, ","), true, ""
}

// sidecarsOps adds to set and remove what makes the sidecars annotation follow the pod,
// with warnings for a value the pod set.
func sidecarsOps(pod *corev1.Pod, reqs map[string]poolRequest, set map[string]string, remove, warnings []string) ([]string,
	[]string) {
	cur, present := pod.Annotations[podapi.AnnotationSidecars]
	want, ok, why := sidecarsValue(pod, reqs)
	switch {
	case ok:
		set[podapi.AnnotationSidecars] = want
		if present && cur != want {
			warnings = append(warnings, fmt.Sprintf("podfence replaced annotation %s=%s with %s, from the init containers' "+
				"restartPolicy", podapi.AnnotationSidecars, cur, want))
		}
	case present:
		remove = append(remove, podapi.AnnotationSidecars)
		warnings = append(warnings, fmt.Sprintf("podfence removed annotation %s=%s: %s", podapi.AnnotationSidecars, cur, why))
	}
	return remove, warnings
}

// checkSidecars checks that the sidecars annotation is the one Mutate writes.
func checkSidecars(pod *corev1.Pod, reqs map[string]poolRequest) error {
	want, needed, why := sidecarsValue(pod, reqs)
	got, has := pod.Annotations[podapi.AnnotationSidecars]
	switch {
	case !needed && has:
		return fmt.Errorf("annotation %s=%q is set, but %s: %s", podapi.AnnotationSidecars, clip(got, 200), why, fromMutation)
	case needed && !has:
		return fmt.Errorf("annotation %s is missing; the init containers call for %q: %s", podapi.AnnotationSidecars, want,
			fromMutation)
	case got != want:
		return fmt.Errorf("annotation %s=%q differs from the init containers, which call for %q: %s", podapi.AnnotationSidecars,
			clip(got, 200), want, fromMutation)
	}
	return nil
}
