package enforce_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// TestProbeInQEMUGuest probes a real misc controller: it runs wherever /sys/fs/cgroup has
// one (the QEMU guest of make qemu: Linux 6.1, cgroup v2 with misc; make qemu runs it by
// this name) and checks that Probe finds the misc root and reads the real misc.capacity
// (TestProbeHost's checks, which also cover hosts without misc). In the guest, whose kernel
// config is known, misc must be there and its misc.capacity lists no sgx_epc (6.1 lists
// only SEV types).
//
// The strict refusal and the best-effort run on a real containerd are the e2e suite's:
// test/e2e/run.sh, its SGX EPC checks (make e2e).
func TestProbeInQEMUGuest(t *testing.T) {
	inGuest := os.Getenv("PODFENCE_IN_QEMU") == "1"
	h := hostCgroups(t)
	if h.misc == "" {
		why := "the kernel has no misc controller (not in /proc/cgroups)"
		if kernelHasMisc(t) {
			why = fmt.Sprintf("the kernel's misc controller is not usable at %s (cgroup %s)", h.root, h.version)
		}
		if inGuest {
			t.Fatalf("the QEMU guest's kernel is built with cgroup v2 and misc, but %s", why)
		}
		t.Skip("needs a misc cgroup controller at /sys/fs/cgroup: " + why)
	}
	raw, err := os.ReadFile(h.misc + "/misc.capacity")
	if err != nil {
		t.Fatalf("misc.capacity: %v", err)
	}
	t.Logf("misc.capacity: %q", raw)
	c := h.check(t)
	t.Logf("probe: cgroup %s, misc %q, supported %v, reason %q", c.Layout.Version, c.MiscRoot, c.Node.Supported, c.Node.Reason)
	if inGuest {
		if c.Layout.Version != cgroups.V2 || c.MiscRoot != h.root {
			t.Errorf("guest layout %s, misc root %q; want v2 with misc at %s", c.Layout.Version, c.MiscRoot, h.root)
		}
		if c.Node.Supported || !strings.Contains(c.Node.Reason, "misc.capacity lists no "+epc.Resource) {
			t.Errorf("guest: supported %v, reason %q; want unsupported because misc.capacity lists no %s", c.Node.Supported,
				c.Node.Reason, epc.Resource)
		}
	}
}

// kernelHasMisc reports whether /proc/cgroups lists the misc controller.
func kernelHasMisc(t *testing.T) bool {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 0 && fields[0] == "misc" {
			return true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return false
}
