package enforce_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/cgroups"
	"github.com/podfence/podfence/epc/enforce"
)

// These run where this package's tests cannot: on a real runtime and a real kernel with a
// misc controller. The harnesses that cover them belong to the e2e suite and the QEMU
// guest; the skips name what each must check.

// TestEPCOnRealContainerd: the e2e suite (make e2e, real containerd + NRI + runc on this
// host's kernel) runs a pod with epc-limit.nri.io/container.<name> under the agent and checks
// that strict refuses it with "the kernel lacks SGX EPC cgroup support" in the CRI error,
// and that best-effort runs it and logs "SGX EPC limit not enforced".
func TestEPCOnRealContainerd(t *testing.T) {
	t.Skip("covered by the e2e suite (e2e/, make e2e): strict refusal message and best-effort run on a real containerd")
}

// TestProbeInQEMUGuest runs in the QEMU guest (make qemu: Linux 6.1, cgroup v2 with the misc
// controller) and probes its real /sys/fs/cgroup: Probe must find the v2 misc root, read
// the real misc.capacity and report that it lists no sgx_epc (6.1 lists only SEV types).
func TestProbeInQEMUGuest(t *testing.T) {
	if os.Getenv("PODFENCE_IN_QEMU") != "1" {
		t.Skip("runs in the QEMU guest (make qemu): needs a kernel with the cgroup v2 misc controller")
	}
	const root = "/sys/fs/cgroup"
	raw, err := os.ReadFile(filepath.Join(root, "misc.capacity"))
	if err != nil {
		t.Fatalf("the guest kernel has no misc.capacity: %v", err)
	}
	t.Logf("guest misc.capacity: %q", raw)
	c := enforce.Probe(cgroups.OS{}, root)
	t.Logf("guest probe: cgroup %s, misc %q, supported %v, reason %q", c.Layout.Version, c.MiscRoot, c.Node.Supported, c.Node.Reason)
	if c.Layout.Version != cgroups.V2 || !c.Node.Unified || c.MiscRoot != root {
		t.Errorf("layout %s unified=%v misc root %q, want v2, unified, %s", c.Layout.Version, c.Node.Unified, c.MiscRoot, root)
	}
	if c.Node.Supported || !strings.Contains(c.Node.Reason, "misc.capacity lists no sgx_epc") {
		t.Errorf("supported %v, reason %q; want unsupported because misc.capacity lists no sgx_epc", c.Node.Supported, c.Node.Reason)
	}
}
