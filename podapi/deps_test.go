package podapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayersWithoutNRI: only the node agent's enforcers link the NRI stack. The webhook,
// the scheduler extender, the pure policies and this API package do not (they share names
// through podapi, not through the NRI plugin).
func TestLayersWithoutNRI(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, root := range []string{
		"github.com/podfence/podfence/podapi",
		"github.com/podfence/podfence/internal/admission",
		"github.com/podfence/podfence/internal/extender",
		"github.com/podfence/podfence/cmd/podfence-extender",
		"github.com/podfence/podfence/internal/coresched",
		"github.com/podfence/podfence/internal/epc",
		"github.com/podfence/podfence/internal/sandbox",
		"github.com/podfence/podfence/internal/cpu/plan",
	} {
		out, err := exec.Command(goTool, "list", "-deps", root).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", root, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "github.com/containerd/nri") || strings.HasPrefix(pkg, "github.com/podfence/podfence/internal/nodeagent") {
				t.Errorf("%s links %s", root, pkg)
			}
		}
	}
}
