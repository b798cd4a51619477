package enforce_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/epc/enforce"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
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

// TestProbeHost probes this machine's real /sys/fs/cgroup, cgroup v1 or v2: what Probe
// finds must be what /proc/self/mountinfo and the kernel's own files say (see probeHost).
func TestProbeHost(t *testing.T) {
	h := hostCgroups(t)
	c := h.check(t)
	t.Logf("host probe: cgroup %s, misc %q, supported %v, capacity %d, reason %q",
		c.Layout.Version, c.MiscRoot, c.Node.Supported, c.Capacity, c.Node.Reason)
}

// hostCgroup is what the host's mount table says about /sys/fs/cgroup.
type hostCgroup struct {
	root    string
	version cgroups.Version
	// misc is the root of the misc controller's hierarchy: root itself on v2 when its
	// cgroup.controllers lists misc, the mount point of a v1 hierarchy with misc under
	// root, or "" without one.
	misc string
}

// hostCgroups reads /proc/self/mountinfo: cgroup2 mounted at /sys/fs/cgroup is v2; anything
// else there (a tmpfs holding v1 hierarchies) is v1, whose misc hierarchy, if any, is a
// "cgroup" mount just under it with misc among its super options. It skips when nothing is
// mounted at /sys/fs/cgroup: there is no cgroup file system to probe.
func hostCgroups(t *testing.T) hostCgroup {
	t.Helper()
	h := hostCgroup{root: "/sys/fs/cgroup"}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no mount table to tell the cgroup version by: %v", err)
	}
	defer f.Close()
	fstype, v1Misc := "", ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch mnt := fields[4]; {
		case mnt == h.root:
			fstype = tail[0] // a later mount over the same point hides the earlier one
		case filepath.Dir(mnt) == h.root && tail[0] == "cgroup" && slices.Contains(strings.Split(tail[2], ","), "misc"):
			v1Misc = mnt
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	switch fstype {
	case "":
		t.Skipf("nothing is mounted at %s: no cgroup file system here", h.root)
	case "cgroup2":
		h.version = cgroups.V2
		ctrls, err := os.ReadFile(filepath.Join(h.root, "cgroup.controllers"))
		if err != nil {
			t.Fatalf("cgroup2 is mounted at %s: %v", h.root, err)
		}
		if slices.Contains(strings.Fields(string(ctrls)), "misc") {
			h.misc = h.root
		}
	default:
		h.version, h.misc = cgroups.V1, v1Misc
	}
	return h
}

// check probes h.root and checks the layout, the misc root and the verdict against the
// mount table and the misc hierarchy's misc.capacity as read here.
func (h hostCgroup) check(t *testing.T) enforce.Capability {
	t.Helper()
	c := enforce.Probe(cgroups.OS{}, h.root)
	if c.Layout.Version != h.version || c.Node.Unified != (h.version == cgroups.V2) {
		t.Errorf("layout %s, unified %v; the mount table says cgroup %s", c.Layout.Version, c.Node.Unified, h.version)
	}
	if c.MiscRoot != h.misc {
		t.Errorf("misc root %q, want %q", c.MiscRoot, h.misc)
	}
	if h.misc == "" {
		want := fmt.Sprintf("no misc controller at %s (cgroup %s; available: ", h.root, h.version)
		if c.Node.Supported || !strings.HasPrefix(c.Node.Reason, want) {
			t.Errorf("supported %v, reason %q; want unsupported, %q...", c.Node.Supported, c.Node.Reason, want)
		}
		return c
	}
	file := filepath.Join(h.misc, "misc.capacity")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("a misc hierarchy without its capacity: %v", err)
	}
	caps, err := cgroups.ParseFlat(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	n, listed, err := caps.Uint(epc.Resource)
	switch {
	case err != nil:
		t.Fatalf("%s: %v", file, err)
	case listed:
		if !c.Node.Supported || c.Capacity != n {
			t.Errorf("supported %v, capacity %d (%q); %s lists %s %d", c.Node.Supported, c.Capacity, c.Node.Reason, file, epc.Resource, n)
		}
	default:
		want := file + " lists no " + epc.Resource
		if c.Node.Supported || !strings.HasPrefix(c.Node.Reason, want) {
			t.Errorf("supported %v, reason %q; want unsupported, %q...", c.Node.Supported, c.Node.Reason, want)
		}
	}
	return c
}
