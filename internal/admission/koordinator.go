package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/coresched"
)

// Warnings are what /validate tells the user about a pod it answers: a Koordinator policy
// label podfence reads as the default policy, as koordlet does, where the user may have
// meant another (a typo of exclusive would give less isolation than asked).
func Warnings(pod *corev1.Pod) []string {
	r, err := coresched.RequestOf(pod.Labels)
	if err != nil || r.UnknownPolicy == "" {
		return nil
	}
	joins := "its namespace's group " + r.Group
	if r.Group == "" {
		joins = "the node's default group"
	}
	return []string{fmt.Sprintf("label %s=%q is not a core-scheduling policy (want %q, %q or empty): podfence reads it as "+
		"empty, as Koordinator does, so the pod joins %s", coresched.KoordLabelPolicy, r.UnknownPolicy, coresched.PolicyExclusive,
		coresched.PolicyNone, joins)}
}
