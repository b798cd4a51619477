package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"
)

// DiscoverHost is Discover with the host's isolation (DiscoverIsolation) in Isolation.
func DiscoverHost(sysfs, procfs string) (*Topology, error) {
	t, err := Discover(sysfs)
	if err != nil {
		return nil, err
	}
	t.Isolation = DiscoverIsolation(sysfs, procfs, t.Online().Union(t.Offline))
	return t, nil
}

// DiscoverIsolation reads what the host isolated at boot from procfs/cmdline
// (CmdlineIsolation) and the kernel's own account in sysfs:
//
//	devices/system/cpu/isolated    the CPUs isolcpus= took out of load balancing
//	devices/system/cpu/nohz_full   the nohz_full CPUs ("(null)" or empty when none)
//
// Where a sysfs file exists it is what the kernel did and wins over the command line (a
// warning names the difference); where it does not, the command line is taken as written.
// managed_irq and rcu_nocbs come from the command line alone. procfs "" reads sysfs alone
// (a captured sysfs tree). present bounds every set. It never fails: what it cannot read is
// a warning.
func DiscoverIsolation(sysfs, procfs string, present cpuset.CPUSet) HostIsolation {
	h, read := NoIsolation(), false
	if procfs != "" {
		file := filepath.Join(procfs, "cmdline")
		if b, err := os.ReadFile(file); err != nil {
			h.Warnings = append(h.Warnings, fmt.Sprintf("read %s: %v; the host's isolation is read from sysfs alone "+
				"(no managed_irq or rcu_nocbs)", file, unwrapPath(err)))
		} else {
			h, read = cmdlineIsolation(string(b), present), true
		}
	}
	cpuDir := filepath.Join(sysfs, "devices", "system", "cpu")
	h.Domain = h.kernelSays(filepath.Join(cpuDir, "isolated"), "isolcpus= (domain)", h.Domain, present, read)
	h.NoHZFull = h.kernelSays(filepath.Join(cpuDir, "nohz_full"), "nohz_full=", h.NoHZFull, present, read)
	h.RCUNoCBs = h.RCUNoCBs.Union(h.NoHZFull) // NO_HZ_FULL selects RCU_NOCB_CPU and offloads them
	return h
}

// kernelSays returns the CPU list in file, bounded by present, or cmd (the command line's
// word) when file does not exist or cannot be read. A difference from cmd is a warning
// when the command line was read.
func (h *HostIsolation) kernelSays(file, param string, cmd, present cpuset.CPUSet, compare bool) cpuset.CPUSet {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return cmd
	}
	if err != nil {
		h.Warnings = append(h.Warnings, fmt.Sprintf("read %s: %v; taking the kernel command line's %s", file, unwrapPath(err), param))
		return cmd
	}
	s := strings.TrimSpace(string(b))
	if s == "(null)" { // nohz_full on kernels without a mask allocated: none
		s = ""
	}
	set, err := ParseCPUList(s)
	if err != nil {
		h.Warnings = append(h.Warnings, fmt.Sprintf("parse %s: %v; taking the kernel command line's %s", file, err, param))
		return cmd
	}
	set = set.Intersection(present)
	if compare && !sameSet(set, cmd) {
		h.Warnings = append(h.Warnings, fmt.Sprintf("the kernel command line's %s names CPUs %s, but the kernel reports %s "+
			"in %s: taking the kernel's", param, orNone(cmd), orNone(set), file))
	}
	return set
}

// orNone is a CPU list, or "none".
func orNone(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}

// sameSet compares sets by content (cpuset's Equals tells a zero CPUSet from an empty one).
func sameSet(a, b cpuset.CPUSet) bool { return a.IsSubsetOf(b) && b.IsSubsetOf(a) }
