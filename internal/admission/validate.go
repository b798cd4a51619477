package admission

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/podapi"
)

// fromMutation ends the messages about annotations the mutating webhook writes.
const fromMutation = "podfence's mutating webhook writes it from the resources: is it installed, and did it run?"

// Validate refuses a pod that breaks a rule of the package doc, after every mutation. It
// returns every problem found, joined, each naming the container, resource, annotation or
// label, its value and the rule.
func Validate(pod *corev1.Pod, cfg *Config) error {
	reqs, err := poolRequests(pod, cfg)
	errs := []error{err}
	if err == nil {
		errs = append(errs, checkCPUPools(pod.Annotations, reqs), checkSidecars(pod, reqs))
		errs = append(errs, checkPinning(pod.Annotations, reqs)...)
	}
	epcWant, err := epcLimits(pod)
	errs = append(errs, err)
	if err == nil {
		errs = append(errs, checkEPC(pod, epcWant)...)
	}
	if _, err = coresched.RequestOf(pod.Labels); err == nil {
		err = checkTenancy(pod, cfg)
	}
	_, isoErr := podapi.ParseIsolation(pod.Annotations) // the agent refuses what it cannot read: refuse it here first
	errs = append(errs, err, checkGivenCPUs(pod.Annotations), isoErr)
	return errors.Join(errs...)
}

// checkGivenCPUs refuses podfence.io/exclusive-cpus (and .<pool>) on a pod: it is the device
// plugin's answer to the kubelet, a container annotation; a pod that sets it would choose its
// CPUs under a runtime that copies pod annotations into containers.
func checkGivenCPUs(annotations map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if k == podapi.AnnotationExclusiveCPUs || strings.HasPrefix(k, podapi.AnnotationExclusiveCPUs+".") {
			errs = append(errs, fmt.Errorf("annotation %s=%q is set on the pod: it is podfence's device plugin's, on containers "+
				"only; a pod asks for exclusive CPUs with the resource %s/<pool>", k, clip(annotations[k], 64), pools.DefaultDomain))
		}
	}
	return errors.Join(errs...)
}

// checkCPUPools checks that the cpu-pools annotation is the one Mutate writes. It compares
// text, not parsed quantities: parsing a quantity can take unbounded time, and Mutate
// replaces any other spelling.
func checkCPUPools(annotations map[string]string, reqs map[string]poolRequest) error {
	want, needed := cpuPoolsValue(reqs)
	got, has := annotations[podapi.AnnotationCPUPools]
	switch {
	case !needed && has:
		return fmt.Errorf("annotation %s=%q is set, but no container asks for a pool resource: %s", podapi.AnnotationCPUPools, got, fromMutation)
	case needed && !has:
		return fmt.Errorf("annotation %s is missing; the pool resources call for %s: %s", podapi.AnnotationCPUPools, want, fromMutation)
	case got != want:
		return fmt.Errorf("annotation %s=%q differs from the pool resources, which call for %s: %s", podapi.AnnotationCPUPools, got,
			want, fromMutation)
	}
	return nil
}
