package enforce_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/cgroups"
	"github.com/podfence/podfence/epc"
	"github.com/podfence/podfence/epc/enforce"
)

func TestProbe(t *testing.T) {
	for _, tc := range []struct {
		name, layout string
		edit         func(t *testing.T, root string)
		supported    bool
		reason       string // with <root> for the tree's root
	}{
		{name: "v2 with sgx_epc", layout: "v2", supported: true},
		{name: "v1 with sgx_epc", layout: "v1", supported: true},
		{name: "v2 mainline kernel", layout: "v2",
			edit:   func(t *testing.T, root string) { writeFile(t, root+"/misc.capacity", "sev 509\nsev_es 0\n") },
			reason: "<root>/misc.capacity lists no sgx_epc (it lists sev, sev_es)"},
		{name: "v1 capacity empty", layout: "v1",
			edit:   func(t *testing.T, root string) { writeFile(t, root+"/misc/misc.capacity", "") },
			reason: "<root>/misc/misc.capacity lists no sgx_epc (it lists nothing)"},
		{name: "v2 capacity absent", layout: "v2",
			edit:   func(t *testing.T, root string) { removeFile(t, root+"/misc.capacity") },
			reason: "read cgroup file: open <root>/misc.capacity: no such file or directory"},
		{name: "v2 without misc", layout: "v2",
			edit:   func(t *testing.T, root string) { writeFile(t, root+"/cgroup.controllers", "cpu memory\n") },
			reason: "no misc controller at <root> (cgroup v2; available: cpu memory)"},
		{name: "v1 without misc", layout: "v1",
			edit:   func(t *testing.T, root string) { removeFile(t, root+"/misc") },
			reason: "no misc controller at <root> (cgroup v1; available: cpu cpuacct cpuset memory pids)"},
		{name: "capacity unreadable", layout: "v2",
			edit:   func(t *testing.T, root string) { writeFile(t, root+"/misc.capacity", "sgx_epc lots\n") },
			reason: `<root>/misc.capacity: sgx_epc "lots": want a number or max`},
		{name: "no cgroupfs", layout: "v2",
			edit:   func(t *testing.T, root string) { removeFile(t, root) },
			reason: "detect cgroup layout at <root>: open <root>: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.layout, epc.Strict, func(root string) {
				if tc.edit != nil {
					tc.edit(t, root)
				}
			})
			c := n.Capability()
			reason := strings.ReplaceAll(tc.reason, "<root>", n.root)
			if c.Node.Supported != tc.supported || c.Node.Reason != reason {
				t.Errorf("supported %v, reason %q;\nwant %v, %q", c.Node.Supported, c.Node.Reason, tc.supported, reason)
			}
			if tc.supported && (c.Capacity != 128<<20 || c.Node.Unified != (tc.layout == "v2")) {
				t.Errorf("capacity %d, unified %v", c.Capacity, c.Node.Unified)
			}
			wantLog := "msg=\"epc probe: SGX EPC limits cannot be enforced\""
			if tc.supported {
				wantLog = "msg=\"epc probe\" root=" + n.root
			}
			if !strings.Contains(n.logs.String(), wantLog) {
				t.Errorf("log lacks %s:\n%s", wantLog, n.logs)
			}
		})
	}
}

// TestProbeHost probes this machine's real /sys/fs/cgroup. This project's test machines
// are cgroup v1 without a misc hierarchy, so SGX EPC limits cannot be enforced there.
func TestProbeHost(t *testing.T) {
	const root = "/sys/fs/cgroup"
	if _, err := os.Stat(root); err != nil {
		t.Skip(err)
	}
	c := enforce.Probe(cgroups.OS{}, root)
	t.Logf("host probe: cgroup %s, misc %q, supported %v, reason %q", c.Layout.Version, c.MiscRoot, c.Node.Supported, c.Node.Reason)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		t.Skip("a cgroup v2 host: the v1 expectations below are for this project's test machines")
	}
	if c.Layout.Version != cgroups.V1 || c.Node.Unified {
		t.Errorf("version %s, want v1", c.Layout.Version)
	}
	if _, err := os.Stat("/dev/sgx_enclave"); err == nil {
		t.Skip("an SGX host: sgx_epc may be listed")
	}
	if c.Node.Supported || c.Node.Reason == "" {
		t.Errorf("supported %v (%q); want no sgx_epc on a host without SGX", c.Node.Supported, c.Node.Reason)
	}
}
