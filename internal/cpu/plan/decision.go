package plan

import (
	"encoding/json"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// EnvVar is one environment variable for the container.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Decision is what the runtime must set up for one container before it starts.
type Decision struct {
	// Allocation is what the container holds (recorded in Ledger and the checkpoint).
	Allocation allocation.Allocation
	// CPUs is cpuset.cpus; Mems is cpuset.mems (the NUMA nodes of CPUs).
	CPUs cpuset.CPUSet
	Mems cpuset.CPUSet
	// Shared is the shared pool's CPUs when the container has a share of it.
	Shared cpuset.CPUSet
	// Quota and Period are the CFS bandwidth in microseconds (Policy.CFSQuotas says whose);
	// Quota 0 means no limit.
	Quota  int64
	Period int64
	// QuotaRaised is true when the share's quota was below MinCFSQuota and was raised to it.
	QuotaRaised bool
	Env         []EnvVar
	// Existing is true when the container already held this allocation (nothing moved).
	Existing bool
}

// Decide turns an allocation into the runtime settings.
func (n *Node) Decide(a allocation.Allocation) Decision { return n.decide(a) }

func (n *Node) decide(a allocation.Allocation) Decision {
	d := Decision{Allocation: a}
	var pools []string // CPU_POOLS
	switch a.Type {
	case allocation.TypeDefault:
		d.CPUs = n.Pools.Default.CPUs
	case allocation.TypeExclusive: // without CPUs gone offline since
		d.CPUs = n.online(a.CPUs)
		d.Env = append(d.Env, EnvVar{Name: EnvExclusiveCPUs, Value: commaList(d.CPUs)})
		pools = append(pools, string(allocation.TypeExclusive))
	}
	excl := d.CPUs.Size()
	milli := n.quotaMilli(a, excl)
	if a.MilliCPU > 0 {
		p, _ := n.Pools.Pool(a.SharedPool)
		d.Shared = p.CPUs
		d.CPUs = d.CPUs.Union(p.CPUs)
		d.Env = append(d.Env, EnvVar{Name: EnvSharedCPUs, Value: commaList(p.CPUs)})
		pools = append(pools, string(allocation.TypeShared))
	}
	if milli > 0 {
		d.Period = n.Policy.CFSPeriod
		d.Quota = milli * d.Period / 1000
		if d.Quota < MinCFSQuota {
			d.Quota, d.QuotaRaised = MinCFSQuota, true
		}
	}
	if len(pools) > 0 {
		d.Env = append(d.Env, EnvVar{Name: EnvCPUPools, Value: strings.Join(pools, "&")})
	}
	if a.Type == allocation.TypeExclusive {
		d.Env = append(d.Env, EnvVar{Name: EnvContainerName, Value: a.Container})
	}
	d.Mems = n.memsOf(d.CPUs)
	return d
}

// quotaMilli is the CFS quota of allocation a in millicpu, 0 for none, by the policy's
// CFSQuotas; excl is the number of exclusive CPUs the container runs on.
func (n *Node) quotaMilli(a allocation.Allocation, excl int) int64 {
	units := int64(0)
	for _, name := range a.ExclusivePools() {
		if ix, ok := n.index[name]; ok {
			off, mine := n.Pools.Offline[name], make([]int, 0, a.CPUs.Size())
			for _, c := range a.CPUs.UnsortedList() { // a's CPUs only: no pool-sized set built
				if ix.Pool().Has(c) || off.Contains(c) {
					mine = append(mine, c)
				}
			}
			units += int64(n.Units(name, cpuset.New(mine...)))
		}
	}
	switch {
	case units == 0:
		return a.MilliCPU // shared only (or nothing)
	case n.Policy.CFSQuotas == QuotasShared:
		return a.MilliCPU
	case n.Policy.CFSQuotas == QuotasSum && a.MilliCPU > 0:
		return int64(excl)*1000 + a.MilliCPU
	case n.Policy.CFSQuotas == QuotasSum:
		return 0
	case a.MilliCPU > 0: // all, with a share: the whole shared pool (its configured size) beside the exclusive units
		p, _ := n.Pools.Pool(a.SharedPool)
		return units*1000 + int64(p.CPUs.Size()+n.Pools.Offline[p.Name].Size())*1000
	}
	return units*1000 + 100 // all, exclusive only: a margin so that it is not throttled by accident
}

// online returns the CPUs of cpus that are online.
func (n *Node) online(cpus cpuset.CPUSet) cpuset.CPUSet {
	if len(n.Pools.Offline) == 0 {
		return cpus
	}
	return cpus.Intersection(n.Topology.Online())
}

// memsOf returns the NUMA nodes of cpus.
func (n *Node) memsOf(cpus cpuset.CPUSet) cpuset.CPUSet {
	var nodes []int
	for _, id := range cpus.UnsortedList() {
		if c, ok := n.Topology.CPUs[id]; ok {
			nodes = append(nodes, c.NUMA)
		}
	}
	return cpuset.New(nodes...)
}

// Env returns the value of an environment variable of the decision ("" if unset).
func (d Decision) EnvValue(name string) string {
	for _, e := range d.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

type decisionJSON struct {
	Allocation allocation.Allocation `json:"allocation"`
	CPUs       string                `json:"cpus"`
	Mems       string                `json:"mems"`
	Shared     string                `json:"sharedCPUs,omitempty"`
	Quota      int64                 `json:"cfsQuota,omitempty"`
	Period     int64                 `json:"cfsPeriod,omitempty"`
	Raised     bool                  `json:"cfsQuotaRaisedToMin,omitempty"`
	Env        []EnvVar              `json:"env,omitempty"`
	Existing   bool                  `json:"existing,omitempty"`
}

// MarshalJSON writes CPU sets in their Linux list form.
func (d Decision) MarshalJSON() ([]byte, error) {
	return json.Marshal(decisionJSON{Allocation: d.Allocation, CPUs: d.CPUs.String(), Mems: d.Mems.String(),
		Shared: d.Shared.String(), Quota: d.Quota, Period: d.Period, Raised: d.QuotaRaised, Env: d.Env, Existing: d.Existing})
}
