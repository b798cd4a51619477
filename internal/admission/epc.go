package admission

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/podapi"
)

// ResourceEPC is the SGX EPC extended resource (Intel's SGX device plugin).
const ResourceEPC = "sgx.intel.com/epc"

// maxAnnotationName is the longest name part of an annotation key (after the "/").
const maxAnnotationName = 63

// epcLimits returns the EPC annotations the pod's resources call for: key → decimal bytes.
// A limit must be a whole number of bytes above 0 (the agent reads 0 as no limit), requests
// must equal it when set, and the container's name must fit the annotation key.
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
			errs = append(errs, &ResourceError{Container: c.Name, Init: c.Init, Resource: ResourceEPC, Value: value,
				Rule: fmt.Sprintf(rule, args...)})
		}
		q, ok := limit(c.Resources, ResourceEPC, bad)
		if !ok {
			continue
		}
		n, whole := q.AsInt64()
		key := epc.AnnotationContainerPrefix + c.Name
		_, name, _ := strings.Cut(key, "/")
		switch {
		case !whole || n < 1:
			bad(q.String(), "want a whole number of bytes above 0, such as 64Mi (the agent reads 0 as no limit)")
		case len(name) > maxAnnotationName:
			bad(q.String(), "the annotation %s… allows container names of at most %d characters; this one has %d",
				epc.AnnotationContainerPrefix, maxAnnotationName-(len(name)-len(c.Name)), len(c.Name))
		default:
			out[key] = strconv.FormatInt(n, 10)
		}
	}
	return out, errors.Join(errs...)
}

// checkEPC checks the EPC annotations: each one the resources call for is there with that
// value, and every limit annotation (container, pod and global) is one the agent can read.
func checkEPC(pod *corev1.Pod, want map[string]string) []error {
	var errs []error
	readable := func(key string) {
		if v, ok := pod.Annotations[key]; ok {
			if err := parseLimit(v); err != nil {
				errs = append(errs, &podapi.AnnotationError{Key: key, Value: v, Err: err})
			}
		}
	}
	readable(epc.AnnotationPod)
	readable(epc.Annotation)
	for _, c := range containers(pod) {
		key := epc.AnnotationContainerPrefix + c.Name
		w, needed := want[key]
		got, has := pod.Annotations[key]
		switch {
		case needed && !has:
			errs = append(errs, fmt.Errorf("annotation %s is missing, but container %q has %s=%s: %s", key, c.Name, ResourceEPC, w, fromMutation))
		case needed && got != w:
			errs = append(errs, &podapi.AnnotationError{Key: key, Value: got,
				Err: fmt.Errorf("differs from the %s limit of container %q (%s bytes): %s", ResourceEPC, c.Name, w, fromMutation)})
		default:
			readable(key)
		}
	}
	return errs
}

// parseLimit is epc.ParseLimit behind the bound on quantities (see costlyQuantity).
func parseLimit(v string) error {
	if costlyQuantity([]byte(v)) {
		return errors.New("not a number of bytes the agent can parse in bounded time")
	}
	_, err := epc.ParseLimit(v)
	return err
}
