package kubeapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentWithoutClientGo: the node agent reaches the API server through this package
// only: client-go would raise its resident memory at start (figure: README, "Kubernetes Events").
func TestAgentWithoutClientGo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	// The podfence binary runs the agent: nothing in it may link client-go (the extender,
	// which needs it, is the separate binary podfence-extender).
	for _, root := range []string{"github.com/podfence/podfence/internal/nodeagent", "github.com/podfence/podfence/cmd/podfence"} {
		out, err := exec.Command(goTool, "list", "-deps", root).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", root, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "k8s.io/client-go/") || pkg == "github.com/podfence/podfence/internal/kube/kubeapi/clientset" {
				t.Errorf("%s depends on %s", root, pkg)
			}
		}
	}
}
