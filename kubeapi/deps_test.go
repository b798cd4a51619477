package kubeapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentWithoutClientGo: the node agent reaches the API server through this package
// only. client-go, linked into it, raised its resident memory at start by 12 MB.
func TestAgentWithoutClientGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/podfence/podfence/agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/client-go/") || pkg == "github.com/podfence/podfence/kubeapi/clientset" {
			t.Errorf("package agent depends on %s", pkg)
		}
	}
}
