package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/podapi"
)

// JSON pointers of the maps Mutate changes.
const (
	annotationsPath = "/metadata/annotations"
	labelsPath      = "/metadata/labels"
)

// Mutate returns the JSON patch that makes pod's podfence annotations and labels follow its
// resources and cfg (see the package doc), with warnings for the user when it overwrites or
// removes a value the pod set. It returns an error, and no patch, when a pool or EPC
// resource breaks a rule. The pod is not changed; pod.Namespace selects profiles.
func Mutate(pod *corev1.Pod, cfg *Config) ([]Op, []string, error) {
	reqs, perr := poolRequests(pod, cfg)
	epc, eerr := epcLimits(pod)
	if err := errors.Join(perr, eerr); err != nil {
		return nil, nil, err
	}
	set := map[string]string{}
	var remove []string
	warnings := defaultPoolWarnings(reqs)
	cur, present := pod.Annotations[podapi.AnnotationCPUPools]
	if want, ok := cpuPoolsValue(reqs); ok {
		set[podapi.AnnotationCPUPools] = want
		if present && cur != want {
			warnings = append(warnings, fmt.Sprintf("podfence replaced annotation %s=%s with %s, from the pool resources",
				podapi.AnnotationCPUPools, cur, want))
		}
	} else if present {
		remove = append(remove, podapi.AnnotationCPUPools)
		warnings = append(warnings, fmt.Sprintf("podfence removed annotation %s=%s: no container asks for a pool resource",
			podapi.AnnotationCPUPools, cur))
	}
	remove, warnings = sidecarsOps(pod, reqs, set, remove, warnings)
	for k, v := range epc {
		set[k] = v
		if cur, ok := pod.Annotations[k]; ok && cur != v {
			warnings = append(warnings, fmt.Sprintf("podfence replaced annotation %s=%s with %s, from the %s limit", k, cur, v, ResourceEPC))
		}
	}
	ops := mapOps(annotationsPath, pod.Annotations, set, remove)
	if p, ok := profileFor(pod, cfg); ok {
		ops = append(ops, mapOps(labelsPath, pod.Labels, p.labels(), nil)...)
	}
	slices.Sort(warnings)
	return ops, warnings, nil
}

// cpuPoolsValue encodes the cpu-pools annotation for the containers that ask for a pool,
// with sorted keys; false when none does.
func cpuPoolsValue(reqs map[string]poolRequest) (string, bool) {
	byCtr := amountsByContainer(reqs)
	if len(byCtr) == 0 {
		return "", false
	}
	b, _ := json.Marshal(byCtr) // cannot fail: strings and integers; sorts map keys
	return string(b), true
}

// amountsByContainer returns container → pool → devices, for containers that ask for a pool.
func amountsByContainer(reqs map[string]poolRequest) map[string]map[string]int64 {
	byCtr := map[string]map[string]int64{}
	for name, r := range reqs {
		if a := r.amounts(); len(a) > 0 {
			byCtr[name] = a
		}
	}
	return byCtr
}

// profileFor returns the first profile that matches a pod without core-scheduling labels. A
// pod with labels keeps them; Validate refuses them if they contradict the profile.
func profileFor(pod *corev1.Pod, cfg *Config) (Profile, bool) {
	if hasCoreSchedLabel(pod.Labels) {
		return Profile{}, false
	}
	_, p, ok := firstProfile(cfg, pod)
	return p, ok
}

// hasCoreSchedLabel reports whether any podfence or Koordinator core-scheduling label is set.
func hasCoreSchedLabel(l map[string]string) bool {
	for _, k := range []string{coresched.LabelGroup, coresched.LabelPolicy, coresched.KoordLabelGroup, coresched.KoordLabelPolicy} {
		if _, ok := l[k]; ok {
			return true
		}
	}
	return false
}
