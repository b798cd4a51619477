package enforce

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// The cgroup v2 cpuset files of partitions (Documentation/admin-guide/cgroup-v2.rst).
const (
	fileExclusive = "cpuset.cpus.exclusive"
	filePartition = "cpuset.cpus.partition"
	fileIsolated  = "cpuset.cpus.isolated" // root only; there from Linux 6.7, with remote partitions
)

// Partition states as cpuset.cpus.partition reads.
const (
	Member   = "member"
	Isolated = "isolated"
)

// Partitions reads and writes cpuset partitions on the cgroupfs of Layout, through FS
// (cgroups.OS when nil).
type Partitions struct {
	Layout cgroups.Layout
	FS     FS
	// NoSysAdmin: this process lacks CAP_SYS_ADMIN, which the kernel asks for before it makes
	// a remote partition.
	NoSysAdmin bool
}

// FS reads and writes cgroup files (cgroups.OS; a fake that keeps the kernel's rules in tests).
type FS interface {
	Read(dir, name string) ([]byte, error)
	Write(dir, name, value string) error
}

func (p Partitions) fs() FS {
	if p.FS == nil {
		return cgroups.OS{}
	}
	return p.FS
}

// Support says whether an isolated partition can be made for a container deep in the
// hierarchy (a remote partition), and if not, why (for status and degraded reports).
func (p Partitions) Support() (ok bool, why string) {
	switch {
	case p.Layout.Version == cgroups.V1:
		return false, "cgroup v1: a CPU is load-balanced while any cpuset holding it has cpuset.sched_load_balance on, the " +
			"root's included; podfence does not change the cpusets it does not own (use isolcpus= or cgroup v2)"
	case p.Layout.Version != cgroups.V2:
		return false, "no cgroupfs found"
	case !p.Layout.Has("cpuset"):
		return false, "cgroup v2 without the cpuset controller"
	}
	if _, err := os.Stat(filepath.Join(p.Layout.Root, fileIsolated)); err != nil {
		return false, "this kernel has no remote cpuset partitions (" + fileIsolated + ", cpuset.cpus.exclusive: Linux 6.7 " +
			"and later); an isolated partition deep in the hierarchy would need every ancestor to be a partition root"
	}
	if p.NoSysAdmin {
		return false, "the agent lacks CAP_SYS_ADMIN, which the kernel asks for before it makes a remote partition (grant it: " +
			"deploy/ component agent-isolation, Helm agent.isolationPartitions=true)"
	}
	return true, ""
}

// dir is the directory of cgroup path.
func (p Partitions) dir(path string) (string, error) { return p.Layout.Dir("cpuset", path) }

// Exclusive reads a cgroup's cpuset.cpus.exclusive (empty when unset or the cgroup is gone).
func (p Partitions) Exclusive(path string) (cpuset.CPUSet, error) {
	dir, err := p.dir(path)
	if err != nil {
		return cpuset.New(), err
	}
	b, err := p.fs().Read(dir, fileExclusive)
	if err != nil {
		if cgroups.Gone(err) {
			return cpuset.New(), nil
		}
		return cpuset.New(), err
	}
	return topology.ParseCPUList(strings.TrimSpace(string(b)))
}

// SetExclusive writes a cgroup's cpuset.cpus.exclusive (empty clears it). A cgroup that is
// gone is no error.
func (p Partitions) SetExclusive(path string, cpus cpuset.CPUSet) error {
	dir, err := p.dir(path)
	if err != nil {
		return err
	}
	v := cpus.String()
	if v == "" {
		v = "\n" // an empty write does not reach the kernel's handler
	}
	if err := p.fs().Write(dir, fileExclusive, v); err != nil && !cgroups.Gone(err) {
		return fmt.Errorf("cgroup %s: set %s to %q: %w", path, fileExclusive, cpus.String(), err)
	}
	return nil
}

// State reads a cgroup's cpuset.cpus.partition ("member", "isolated", "isolated invalid
// (<reason>)"...); "" when the cgroup is gone.
func (p Partitions) State(path string) (string, error) {
	dir, err := p.dir(path)
	if err != nil {
		return "", err
	}
	b, err := p.fs().Read(dir, filePartition)
	if err != nil {
		if cgroups.Gone(err) {
			return "", nil
		}
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// SetState writes a cgroup's cpuset.cpus.partition (Member or Isolated). A cgroup that is
// gone is no error.
func (p Partitions) SetState(path, state string) error {
	dir, err := p.dir(path)
	if err != nil {
		return err
	}
	if err := p.fs().Write(dir, filePartition, state); err != nil && !cgroups.Gone(err) {
		return fmt.Errorf("cgroup %s: set %s to %s: %w", path, filePartition, state, err)
	}
	return nil
}

// Valid says whether a partition state read back is a valid isolated partition, and if not
// the kernel's reason.
func Valid(state string) (bool, string) {
	if state == Isolated {
		return true, ""
	}
	if i := strings.Index(state, "("); i >= 0 && strings.HasSuffix(state, ")") {
		return false, state[i+1 : len(state)-1]
	}
	if state == "" {
		return false, "the cgroup is gone"
	}
	return false, "the partition is " + state
}
