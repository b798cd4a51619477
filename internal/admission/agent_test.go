package admission

import (
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

// TestAgentReadsAnnotation: the agent's parser reads the cpu-pools annotation Mutate writes
// as the same request the planner reads from the pod's resources.
func TestAgentReadsAnnotation(t *testing.T) {
	pod := testPod("s", ctr("app", "podfence.io/exclusive_dp=2", "nokia.k8s.io/shared_caas=1k"), ctr("plain", "cpu=1"),
		"init", ctr("setup", "podfence.io/shared_web=250"))
	patched := applyMutation(t, pod, testConfig(t))
	got, err := podapi.ParseCPUPools(patched.Annotations[podapi.AnnotationCPUPools])
	if err != nil {
		t.Fatal(err)
	}
	want, err := plan.ContainerRequests(pod)
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range want {
		if req.String() != got[name].String() {
			t.Errorf("container %s: the agent reads %q, the planner %q from the resources", name, got[name], req)
		}
	}
	if len(got) != 2 {
		t.Errorf("annotation for %d containers, want 2 (app, setup): %v", len(got), got)
	}
}
