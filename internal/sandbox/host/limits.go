package host

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/sandbox"
)

// Applied is what Set put in force.
type Applied struct {
	// Limits as written: CPUs and Mems resolved (the parent's where not restricted).
	sandbox.Limits
	// MemoryKept is true when the memory limit asked for was below the cgroup's usage
	// (Usage): the limit in place was kept, since writing less would make the kernel
	// reclaim or OOM-kill the VM. Memory is then the limit kept (0: none).
	MemoryKept bool
	Usage      int64
}

// Set writes l to the cgroup: cpuset.cpus and cpuset.mems (the parent's where l leaves
// them unrestricted; only CPUs the parent has), the CFS quota in sandbox.Period, the
// memory limit unless it is below current usage (see Applied), and pids.max. A failure
// in one controller does not stop the others; the errors are joined.
func (c *Cgroup) Set(l sandbox.Limits) (Applied, error) {
	a := Applied{Limits: l}
	var errs []error
	if _, ok := c.dirs["cpuset"]; ok {
		cpus, mems, err := c.setCpuset(l)
		a.CPUs, a.Mems = cpus, mems
		errs = append(errs, err)
	} else if !l.CPUs.IsEmpty() {
		errs = append(errs, c.missing("cpuset"))
	}
	errs = append(errs, c.setQuota(l.Quota))
	kept, usage, err := c.setMemory(l.Memory)
	if kept >= 0 {
		a.Memory, a.MemoryKept, a.Usage = kept, true, usage
	}
	errs = append(errs, err)
	errs = append(errs, c.setMax("pids", "pids.max", l.Pids))
	return a, errors.Join(errs...)
}

func (c *Cgroup) missing(ctrl string) error {
	return fmt.Errorf("no %s controller at %s (cgroup %s)", ctrl, c.layout.Root, c.layout.Version)
}

// setCpuset writes cpuset.mems, then cpuset.cpus. Asked-for CPUs or nodes the parent lacks
// are left out, with an error naming both sets.
func (c *Cgroup) setCpuset(l sandbox.Limits) (cpus, mems cpuset.CPUSet, err error) {
	dir := c.dirs["cpuset"]
	parent := filepath.Dir(dir)
	eff := "" // v1 has no effective files at the parent: its own sets are what it has
	if c.layout.Version == cgroups.V2 {
		eff = ".effective"
	}
	var errs []error
	for _, f := range []struct {
		name string
		want cpuset.CPUSet
		got  *cpuset.CPUSet
	}{{"cpuset.mems", l.Mems, &mems}, {"cpuset.cpus", l.CPUs, &cpus}} {
		have, err := c.readSet(parent, f.name+eff)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		set := f.want
		if set.IsEmpty() {
			set = have
		} else if !set.IsSubsetOf(have) {
			errs = append(errs, fmt.Errorf("%s %s is not within the pod cgroup's %s: using %s", f.name, set, have,
				orAll(set.Intersection(have), have)))
			set = orAll(set.Intersection(have), have)
		}
		*f.got = set
		if err := c.fs.Write(dir, f.name, set.String()); err != nil {
			errs = append(errs, err)
		}
	}
	return cpus, mems, errors.Join(errs...)
}

func orAll(s, all cpuset.CPUSet) cpuset.CPUSet {
	if s.IsEmpty() {
		return all
	}
	return s
}

func (c *Cgroup) readSet(dir, name string) (cpuset.CPUSet, error) {
	b, err := c.fs.Read(dir, name)
	if err != nil {
		return cpuset.New(), err
	}
	s, err := topology.ParseCPUList(string(b))
	if err != nil {
		return cpuset.New(), fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return s, nil
}

// setQuota writes the CFS bandwidth: cpu.max on v2; on v1 cpu.cfs_quota_us, after
// setting cpu.cfs_period_us (with no quota meanwhile, so that no intermediate pair is
// refused) if it is not sandbox.Period yet.
func (c *Cgroup) setQuota(quota int64) error {
	dir, ok := c.dirs["cpu"]
	if !ok {
		if quota > 0 {
			return c.missing("cpu")
		}
		return nil
	}
	period := strconv.Itoa(sandbox.Period)
	if c.layout.Version == cgroups.V2 {
		q := "max"
		if quota > 0 {
			q = strconv.FormatInt(quota, 10)
		}
		return c.fs.Write(dir, "cpu.max", q+" "+period)
	}
	if p, err := c.readInt(dir, "cpu.cfs_period_us"); err != nil || p != sandbox.Period {
		if err := c.fs.Write(dir, "cpu.cfs_quota_us", "-1"); err != nil {
			return err
		}
		if err := c.fs.Write(dir, "cpu.cfs_period_us", period); err != nil {
			return err
		}
	}
	q := "-1"
	if quota > 0 {
		q = strconv.FormatInt(quota, 10)
	}
	return c.fs.Write(dir, "cpu.cfs_quota_us", q)
}

// setMemory writes the memory limit unless it is below the current usage; then it returns
// the limit in place (0: none) and the usage, else kept = -1.
func (c *Cgroup) setMemory(limit int64) (kept, usage int64, err error) {
	dir, ok := c.dirs["memory"]
	if !ok {
		if limit > 0 {
			return -1, 0, c.missing("memory")
		}
		return -1, 0, nil
	}
	maxFile, curFile, none := "memory.max", "memory.current", "max"
	if c.layout.Version == cgroups.V1 {
		maxFile, curFile, none = "memory.limit_in_bytes", "memory.usage_in_bytes", "-1"
	}
	if limit <= 0 {
		return -1, 0, c.fs.Write(dir, maxFile, none)
	}
	usage, err = c.readInt(dir, curFile)
	if err != nil {
		return -1, 0, err
	}
	if limit < usage {
		cur, err := c.readInt(dir, maxFile)
		if err != nil || cur >= 1<<62 { // v1 shows no limit as a page-rounded MaxInt64
			cur = 0
		}
		return cur, usage, err
	}
	return -1, usage, c.fs.Write(dir, maxFile, strconv.FormatInt(limit, 10))
}

// setMax writes a "max"-or-number file.
func (c *Cgroup) setMax(ctrl, name string, v int64) error {
	dir, ok := c.dirs[ctrl]
	if !ok {
		if v > 0 {
			return c.missing(ctrl)
		}
		return nil
	}
	s := "max"
	if v > 0 {
		s = strconv.FormatInt(v, 10)
	}
	return c.fs.Write(dir, name, s)
}

// readInt reads a number file; "max" is MaxInt64.
func (c *Cgroup) readInt(dir, name string) (int64, error) {
	b, err := c.fs.Read(dir, name)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 1<<63 - 1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", filepath.Join(dir, name), s)
	}
	return v, nil
}
