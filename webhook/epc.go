package webhook

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// SGX EPC: the device plugin's resource and the annotations the NRI side enforces with
// misc.max (nri-plugins' sgx-epc format).
const (
	ResourceEPC         = "sgx.intel.com/epc"
	EPCAnnotationPrefix = "epc-limit.nri.io/container."
)

// maxAnnotationName is the longest name part of an annotation key (after the "/").
const maxAnnotationName = 63

// EPCAnnotation returns the annotation key that limits container's EPC.
func EPCAnnotation(container string) string { return EPCAnnotationPrefix + container }

// epcLimits returns the EPC annotations the pod's resources call for: key → decimal bytes.
// A limit must be a whole number of bytes, requests must equal it when set, and the
// container's name must fit the annotation key.
func epcLimits(pod *corev1.Pod) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for _, c := range containers(pod) {
		_, hasLim := c.Resources.Limits[ResourceEPC]
		_, hasReq := c.Resources.Requests[ResourceEPC]
		if !hasLim && !hasReq {
			continue
		}
		bad := func(value, rule string, args ...any) {
			errs = append(errs, &ResourceError{Container: c.Name, Init: c.Init, Resource: ResourceEPC, Value: value, Rule: fmt.Sprintf(rule, args...)})
		}
		q, ok := limit(c.Resources, ResourceEPC, bad)
		if !ok {
			continue
		}
		n, whole := q.AsInt64()
		key := EPCAnnotation(c.Name)
		switch {
		case !whole || n < 0:
			bad(q.String(), "want a whole number of bytes, 0 or more, such as 64Mi")
		case len(key)-len("epc-limit.nri.io/") > maxAnnotationName:
			bad(q.String(), "the annotation %s… allows container names of at most %d characters; this one has %d",
				EPCAnnotationPrefix, maxAnnotationName-len("container."), len(c.Name))
		default:
			out[key] = strconv.FormatInt(n, 10)
		}
	}
	return out, errors.Join(errs...)
}
