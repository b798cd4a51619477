package admission_test

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podfence/podfence/internal/admission"
)

// Mutate on a pod whose container asks for two exclusive CPUs, half a CPU of the shared pool
// and 32 MiB of SGX EPC, in a namespace a profile puts in core-scheduling group "dataplane".
func ExampleMutate() {
	profiles, err := admission.ParseProfiles("profiles.yaml", []byte("- {namespaces: [telco], group: dataplane}\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "router", Namespace: "telco", Labels: map[string]string{"app": "router"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "fwd",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				"podfence.io/exclusive_dp": resource.MustParse("2"),
				"podfence.io/shared_caas":  resource.MustParse("500"),
				"sgx.intel.com/epc":        resource.MustParse("32Mi"),
			}},
		}}},
	}
	ops, warnings, err := admission.Mutate(pod, &admission.Config{Profiles: profiles})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		b, _ := json.Marshal(op)
		fmt.Println(string(b))
	}
	fmt.Println("warnings:", len(warnings))
	// Output:
	// {"op":"add","path":"/metadata/annotations","value":{"epc-limit.nri.io/container.fwd":"33554432","podfence.io/cpu-pools":"{\"fwd\":{\"exclusive_dp\":2,\"shared_caas\":500}}"}}
	// {"op":"add","path":"/metadata/labels/podfence.io~1core-sched-group","value":"dataplane"}
	// warnings: 0
}

// Validate refuses a pinning annotation that asks for more CPUs than the container requests.
func ExampleValidate() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gen", Namespace: "telco", Annotations: map[string]string{
			"podfence.io/cpu-pools": `{"gen":{"exclusive_dp":1}}`,
			"podfence.io/cpus":      `[{"container":"gen","processes":[{"process":"/bin/gen","pool":"exclusive_dp","cpus":2}]}]`,
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "gen",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"podfence.io/exclusive_dp": resource.MustParse("1")}},
		}}},
	}
	fmt.Println(admission.Validate(pod, nil))
	// Output:
	// annotation podfence.io/cpus="[{\"container\":\"gen\",\"processes\":[{\"process\":\"/bin/gen\",\"pool\":\"exclusive_dp\",\"cpus\":2}]}]": container "gen": not enough CPUs: exclusive processes ask for 2 CPUs, the container has 1: lower their cpus in the annotation or raise the container's exclusive pool request
}
