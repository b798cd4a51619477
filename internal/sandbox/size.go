package sandbox

import (
	"math"
	"math/bits"

	"k8s.io/utils/cpuset"
)

const (
	// Period is the CFS period of every sandbox cgroup, in microseconds (the kernel's and
	// the kubelet's default).
	Period = 100000
	// MinQuota and MaxQuota bound a CFS quota in microseconds, as the kernel does (1 ms;
	// 2^44-1 µs). A quota above MaxQuota is no limit.
	MinQuota = 1000
	MaxQuota = 1<<44 - 1
)

// Resources are what a container, or the RuntimeClass overhead, asks of the host: a CFS
// quota per period (microseconds), a memory limit (bytes) and a pids limit. A value ≤ 0 is
// unset: for a container that means unlimited, for the overhead nothing to add.
type Resources struct {
	Quota  int64
	Period int64
	Memory int64
	Pids   int64
}

// Member is one live container of a sandbox: its effective resources (podfence's quota
// where podfence set one) and cpuset. An empty CPUs is no cpuset: any CPU.
type Member struct {
	Resources
	CPUs cpuset.CPUSet
	Mems cpuset.CPUSet
}

// Limits are a sandbox cgroup's limits. The zero value limits nothing.
type Limits struct {
	// CPUs and Mems are cpuset.cpus and cpuset.mems; empty is not restricted (the
	// parent's).
	CPUs cpuset.CPUSet
	Mems cpuset.CPUSet
	// Quota is the CFS quota in microseconds per Period; 0 is no limit.
	Quota int64
	// Memory is the memory limit in bytes, Pids the pids limit; 0 is no limit.
	Memory int64
	Pids   int64
}

// Equal reports whether l and o set the same values.
func (l Limits) Equal(o Limits) bool {
	return sameSet(l.CPUs, o.CPUs) && sameSet(l.Mems, o.Mems) && l.Quota == o.Quota && l.Memory == o.Memory && l.Pids == o.Pids
}

// sameSet compares sets by content (the zero CPUSet and cpuset.New() are both empty).
func sameSet(a, b cpuset.CPUSet) bool { return a.Size() == b.Size() && a.IsSubsetOf(b) }

// Size returns the limits of a sandbox with these containers and this overhead. With no
// container, the sandbox gets the overhead alone and the cpuset empty (it holds the VM
// while it boots; podfence passes the default pool); with no overhead either it is not
// limited but for that cpuset.
//
// Each container's quota is normalised to Period and rounded up to a microsecond, so
// containers with other periods count for their share of a CPU: 25000/50000 µs counts as
// 50000/100000 µs. A result below MinQuota is raised to it; sums past MaxQuota (memory or
// pids past MaxInt64) are no limit, since no node has that much.
func Size(overhead Resources, members []Member, empty cpuset.CPUSet) Limits {
	l := Limits{CPUs: empty}
	if len(members) > 0 {
		l.CPUs, l.Mems = cpuset.New(), cpuset.New()
	}
	quota, quotaOK := normalize(overhead.Quota, overhead.Period)
	memory, memOK := positive(overhead.Memory), true
	pids, pidsOK := positive(overhead.Pids), true
	anyCPU, anyMem := false, false
	for _, m := range members {
		q, ok := normalize(m.Quota, m.Period)
		quotaOK = quotaOK && ok && m.Quota > 0 && m.Period > 0
		quota = addSat(quota, q)
		memOK = memOK && m.Memory > 0
		memory = addSat(memory, positive(m.Memory))
		pidsOK = pidsOK && m.Pids > 0
		pids = addSat(pids, positive(m.Pids))
		anyCPU, anyMem = anyCPU || m.CPUs.IsEmpty(), anyMem || m.Mems.IsEmpty()
		l.CPUs = l.CPUs.Union(m.CPUs)
		l.Mems = l.Mems.Union(m.Mems)
	}
	if anyCPU {
		l.CPUs = cpuset.New() // a container on any CPU: the sandbox on any CPU
	}
	if anyMem {
		l.Mems = cpuset.New()
	}
	if quotaOK && quota > 0 && quota <= MaxQuota {
		l.Quota = max(quota, MinQuota)
	}
	if memOK && memory < math.MaxInt64 {
		l.Memory = memory
	}
	if pidsOK && pids < math.MaxInt64 {
		l.Pids = pids
	}
	return l
}

// normalize returns quota/period in Period, rounded up; ok is false if the result does
// not fit (MaxQuota+1 is returned then, which is no limit). Unset values give 0, true.
func normalize(quota, period int64) (int64, bool) {
	if quota <= 0 || period <= 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(quota), Period)
	if hi >= uint64(period) {
		return MaxQuota + 1, false
	}
	q, rem := bits.Div64(hi, lo, uint64(period))
	if rem != 0 {
		q++
	}
	if q > MaxQuota {
		return MaxQuota + 1, false
	}
	return int64(q), true
}

// addSat adds two non-negative values, saturating at MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func positive(v int64) int64 { return max(v, 0) }
