package manifest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The resources every container podfence ships must set: a CPU and a memory request (the
// scheduler's accounting) and a memory limit (a leak or a burst ends in its own cgroup, not
// in the node's). No CPU limit: CFS throttling would only slow the agents' answers.
var (
	wantRequests = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	wantLimits   = []corev1.ResourceName{corev1.ResourceMemory}
)

// CheckResources returns an error naming the object, the container and the resource for the
// first container (init containers included) of a workload manifest (Pod, Deployment,
// DaemonSet, StatefulSet, ReplicaSet, Job, CronJob) without a CPU and memory request and a
// memory limit. Other kinds pass.
func CheckResources(doc []byte) error {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("read manifest: %w", err)
	}
	var spec *corev1.PodSpec
	var err error
	switch head.Kind {
	case "Pod":
		var o corev1.Pod
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec
	case "Deployment":
		var o appsv1.Deployment
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.Template.Spec
	case "DaemonSet":
		var o appsv1.DaemonSet
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.Template.Spec
	case "StatefulSet":
		var o appsv1.StatefulSet
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.Template.Spec
	case "ReplicaSet":
		var o appsv1.ReplicaSet
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.Template.Spec
	case "Job":
		var o batchv1.Job
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.Template.Spec
	case "CronJob":
		var o batchv1.CronJob
		err, spec = yaml.Unmarshal(doc, &o), &o.Spec.JobTemplate.Spec.Template.Spec
	default:
		return nil
	}
	what := head.Kind + " " + head.Metadata.Name
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	check := func(kind string, cs []corev1.Container) error {
		for _, c := range cs {
			for _, r := range wantRequests {
				if _, ok := c.Resources.Requests[r]; !ok {
					return fmt.Errorf("%s: %s %s: no resources.requests.%s (want requests %v and limits %v)", what, kind, c.Name, r,
						wantRequests, wantLimits)
				}
			}
			for _, r := range wantLimits {
				if _, ok := c.Resources.Limits[r]; !ok {
					return fmt.Errorf("%s: %s %s: no resources.limits.%s (want requests %v and limits %v)", what, kind, c.Name, r,
						wantRequests, wantLimits)
				}
			}
		}
		return nil
	}
	if err := check("init container", spec.InitContainers); err != nil {
		return err
	}
	return check("container", spec.Containers)
}
