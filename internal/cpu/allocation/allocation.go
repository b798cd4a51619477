// Package allocation holds the agent's record of what it allocated: one Allocation per container.
// It is plain data shared by the planner (which computes allocations) and the checkpoint
// (which persists them).
package allocation

import (
	"encoding/json"
	"fmt"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

// PoolType is how a pool hands out CPUs; the pool config names it by the pool name's prefix.
type PoolType string

// The pool types.
const (
	TypeExclusive PoolType = "exclusive" // whole CPUs, one container each
	TypeShared    PoolType = "shared"    // millicpu shares, enforced by CFS quota
	TypeDefault   PoolType = "default"   // everything else
)

// TypeRank orders pool types for display: exclusive, then shared, then default (and any
// other).
func TypeRank(t PoolType) int {
	switch t {
	case TypeExclusive:
		return 0
	case TypeShared:
		return 1
	}
	return 2
}

// Key names one container of one pod.
type Key struct {
	PodUID    string
	Container string
}

func (k Key) String() string { return k.PodUID + "/" + k.Container }

// Allocation is what one container holds. Exclusive containers hold CPUs (and Idled siblings
// under a singleThreaded pool); shared containers hold MilliCPU of the shared pool and run on
// all of it; default-pool containers hold nothing.
type Allocation struct {
	PodUID    string
	Namespace string
	Pod       string
	Container string
	Pool      string
	Type      PoolType
	CPUs      cpuset.CPUSet
	Idled     cpuset.CPUSet
	// SharedPool and MilliCPU: the shared-pool share, alone or beside exclusive CPUs.
	SharedPool string
	MilliCPU   int64
	// ExtraPools are the further exclusive pools of a container that asks more than one, as
	// CPU-Pooler lets it: CPUs and Idled then hold the CPUs of Pool and of each of these.
	ExtraPools []string
}

// ExclusivePools returns the exclusive pools whose CPUs the allocation holds: Pool and
// ExtraPools; none for other types.
func (a Allocation) ExclusivePools() []string {
	if a.Type != TypeExclusive {
		return nil
	}
	return append([]string{a.Pool}, a.ExtraPools...)
}

// Key returns the allocation's container key.
func (a Allocation) Key() Key { return Key{PodUID: a.PodUID, Container: a.Container} }

// Held is every CPU the allocation keeps from others: its CPUs plus idled siblings.
func (a Allocation) Held() cpuset.CPUSet { return a.CPUs.Union(a.Idled) }

type allocationJSON struct {
	PodUID    string   `json:"podUID"`
	Namespace string   `json:"namespace,omitempty"`
	Pod       string   `json:"pod,omitempty"`
	Container string   `json:"container"`
	Pool      string   `json:"pool"`
	Type      PoolType `json:"type"`
	CPUs      string   `json:"cpus,omitempty"`
	Idled     string   `json:"idled,omitempty"`
	Shared    string   `json:"sharedPool,omitempty"`
	MilliCPU  int64    `json:"milliCPU,omitempty"`
	Extra     []string `json:"extraPools,omitempty"`
}

// MarshalJSON writes CPU sets in their canonical Linux list form.
func (a Allocation) MarshalJSON() ([]byte, error) {
	return json.Marshal(allocationJSON{
		PodUID: a.PodUID, Namespace: a.Namespace, Pod: a.Pod, Container: a.Container,
		Pool: a.Pool, Type: a.Type, CPUs: a.CPUs.String(), Idled: a.Idled.String(), Shared: a.SharedPool, MilliCPU: a.MilliCPU,
		Extra: a.ExtraPools,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Allocation) UnmarshalJSON(b []byte) error {
	var j allocationJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	cpus, err := topology.ParseCPUList(j.CPUs)
	if err != nil {
		return fmt.Errorf("field cpus %q: %w", j.CPUs, err)
	}
	idled, err := topology.ParseCPUList(j.Idled)
	if err != nil {
		return fmt.Errorf("field idled %q: %w", j.Idled, err)
	}
	*a = Allocation{PodUID: j.PodUID, Namespace: j.Namespace, Pod: j.Pod, Container: j.Container,
		Pool: j.Pool, Type: j.Type, CPUs: cpus, Idled: idled, SharedPool: j.Shared, MilliCPU: j.MilliCPU, ExtraPools: j.Extra}
	return nil
}
