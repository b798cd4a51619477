package enforce_test

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/observe/status"
)

// TestState: the report section has each container's limit, whether it holds and its use.
func TestState(t *testing.T) {
	n := newNode(t, "v2", epc.Strict, nil)
	tracked(t, n, "v2")
	s, ok := n.State().(status.EPC)
	if !ok {
		t.Fatalf("State is a %T, want status.EPC", n.State())
	}
	if !s.Supported || s.Policy != "strict" || s.CapacityBytes != 128<<20 || len(s.Containers) != 2 {
		t.Fatalf("state %+v", s)
	}
	enclave, plain := s.Containers[0], s.Containers[1]
	if enclave.Pod != "p1" || enclave.Container != "enclave" || enclave.LimitBytes != 1<<20 || !enclave.InForce ||
		enclave.UsageBytes == nil || *enclave.UsageBytes != 1<<20 {
		t.Errorf("enclave %+v", enclave)
	}
	if plain.Container != "plain" || plain.LimitBytes != 0 || plain.UsageBytes == nil || *plain.UsageBytes != 2<<20 {
		t.Errorf("plain %+v", plain)
	}
	if d := n.Degraded(); len(d) != 0 {
		t.Errorf("degraded %+v on a node that enforces", d)
	}
}

// TestDegraded: best-effort on a node without support runs the container uncapped and
// says so.
func TestDegraded(t *testing.T) {
	n := newNode(t, "v2", epc.BestEffort, func(root string) { writeFile(t, root+"/misc.capacity", "") })
	p := pod("p1", map[string]string{epc.AnnotationPod: "64Mi"})
	if _, err := n.CreateContainer(ctx, p, ctr("c1", p, "app", ctrPath), plan.Decision{}); err != nil {
		t.Fatal(err)
	}
	s := n.State().(status.EPC)
	if s.Supported || s.Reason == "" || len(s.Containers) != 1 || s.Containers[0].InForce || s.Containers[0].UsageBytes != nil {
		t.Errorf("state %+v", s)
	}
	d := n.Degraded()
	if len(d) != 1 || d[0].Pod != "p1" || d[0].Container != "app" || d[0].Reason != "EPCLimitNotEnforced" ||
		!strings.HasPrefix(d[0].Message, "SGX EPC limit 67108864 bytes is not enforced: the node cannot enforce it: ") ||
		!strings.HasSuffix(d[0].Message, "; policy best-effort runs the container uncapped") {
		t.Errorf("degraded %+v", d)
	}
}
