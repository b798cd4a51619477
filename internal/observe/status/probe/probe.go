// Package probe finds the kernel features the node report shows (status.Kernel): SMT, core
// scheduling, the cgroup layout and driver, and SGX EPC in the cgroup misc controller. It
// reads sysfs and cgroupfs at the roots it is given and writes nothing; core scheduling is
// probed by the caller (kernel.Prctl.Probe, a cookie on a throw-away thread of its own).
package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/epc/enforce"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/observe/status"
)

// Config is where to look.
type Config struct {
	// Sysfs is the sysfs root ("/sys"); ThreadsPerCore comes from its topology.
	Sysfs          string
	ThreadsPerCore int
	// CgroupRoot is the cgroupfs mount point ("/sys/fs/cgroup"); "" leaves the cgroup and
	// SGX EPC features unknown.
	CgroupRoot string
	// CoreSched is what kernel.Prctl{}.Probe() found.
	CoreSched kernel.Support
}

// Kernel returns the node's kernel features. It never fails: what it cannot read is a
// feature not available, with the reason in its detail.
func Kernel(cfg Config) status.Kernel {
	k := status.Kernel{SMT: smt(cfg.Sysfs, cfg.ThreadsPerCore), CoreScheduling: coreSched(cfg.CoreSched)}
	if cfg.CgroupRoot == "" {
		k.Cgroup = status.Cgroup{Version: cgroups.Version(0).String(), Detail: "no cgroup root given"}
		k.SGXEPC.Detail = "no cgroup root given"
		return k
	}
	c := enforce.Probe(cgroups.OS{}, cfg.CgroupRoot)
	k.Cgroup = status.Cgroup{Version: c.Layout.Version.String(), Controllers: c.Layout.Controllers()}
	if c.Layout.Version == 0 {
		k.Cgroup.Detail = c.Node.Reason
	} else {
		k.Cgroup.Driver = Driver(c.Layout)
	}
	k.SGXEPC = status.Feature{Available: c.Node.Supported, Detail: c.Node.Reason}
	k.EPCCapacityBytes = c.Capacity
	return k
}

// smt reads the kernel's SMT switch (devices/system/cpu/smt/control: on, off, forceoff,
// notsupported, notimplemented) beside the topology's threads per core.
func smt(sysfs string, threads int) status.Feature {
	f := status.Feature{Available: threads > 1, Detail: fmt.Sprintf("%d threads per core", max(threads, 1))}
	if threads == 1 {
		f.Detail = "1 thread per core"
	}
	if b, err := os.ReadFile(filepath.Join(sysfs, "devices/system/cpu/smt/control")); err == nil {
		f.Detail += ", smt/control " + strings.TrimSpace(string(b))
	}
	return f
}

func coreSched(s kernel.Support) status.Feature {
	for _, known := range []error{kernel.ErrNoSchedCore, kernel.ErrNoSMT, kernel.ErrNoPermission} {
		if errors.Is(s.Err, known) {
			return status.Feature{Detail: known.Error()}
		}
	}
	if s.Err != nil {
		return status.Feature{Detail: s.Err.Error()}
	}
	d := "prctl(PR_SCHED_CORE) works"
	if !s.Readable {
		d += "; cookies read back as 0 (the kernel's cookie key is not set yet)"
	}
	if !s.CapSysPtrace {
		d += "; no CAP_SYS_PTRACE"
	}
	return status.Feature{Available: true, Detail: d}
}

// Driver guesses the cgroup driver the kubelet and the runtime use from the pod cgroups
// the kubelet made: kubepods.slice (systemd) or kubepods (cgroupfs) at the root of the
// hierarchy (v2), or of the cpuset, cpu, memory or pids hierarchy (v1). "" if neither is
// there.
func Driver(l cgroups.Layout) string {
	roots := []string{l.Root}
	if l.Version == cgroups.V1 {
		roots = nil
		for _, c := range []string{"cpuset", "cpu", "memory", "pids"} {
			if d, err := l.Dir(c, "/"); err == nil {
				roots = append(roots, d)
			}
		}
	}
	for _, r := range roots {
		for _, d := range []struct{ dir, driver string }{{"kubepods.slice", "systemd"}, {"kubepods", "cgroupfs"}} {
			if st, err := os.Stat(filepath.Join(r, d.dir)); err == nil && st.IsDir() {
				return d.driver
			}
		}
	}
	return ""
}
