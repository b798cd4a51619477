// Package status is the node report: what podfence decided on one node and what the node's
// kernel can enforce. The agent serves it as JSON at /state (package metrics); `podfence
// status` prints it for people (WriteText), from the agent or, when the agent is down,
// from the checkpoint.
//
// The model is plain data in JSON form: CPU sets are Linux CPU lists ("0-3,8"), so a report
// read back from /state renders the same as one built in process. Build computes the pool
// and container parts from the planner's node and the allocations; the caller adds the
// kernel features (package status/probe) and the extensions' sections (EPC, core
// scheduling, VM sandboxes), which Build merges into the containers where it knows them.
package status

import (
	"encoding/json"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/topology"
)

// Report is one node's state.
type Report struct {
	Node string `json:"node,omitempty"`
	// Source says where the report comes from: "agent", or "checkpoint" when the agent is
	// down and the allocations were read from its checkpoint directory.
	Source string    `json:"source"`
	Time   time.Time `json:"time"`
	// Ready: the agent has been synchronised by the runtime at least once.
	Ready      bool   `json:"ready"`
	PoolConfig string `json:"poolConfig,omitempty"`
	// PendingPoolConfig is a changed pool config the agent waits to take: running
	// containers would have to move. Nil when none.
	PendingPoolConfig *PendingPoolConfig `json:"pendingPoolConfig,omitempty"`
	Topology          Topology           `json:"topology"`
	Pools             []Pool             `json:"pools"`
	Containers        []Container        `json:"containers"`
	Kernel            Kernel             `json:"kernel"`
	// Extensions holds each extension's own section, by extension name (nri.StateReporter).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
	// Warnings are the node's (an odd kernel command line, the pool layout's) and problems
	// found while building the report.
	Warnings []string `json:"warnings,omitempty"`
}

// Topology is the node's CPUs, enough to draw them by socket, NUMA node and core.
type Topology struct {
	Summary        string         `json:"summary"`
	Sockets        int            `json:"sockets"`
	NUMANodes      int            `json:"numaNodes"`
	Cores          int            `json:"cores"`
	ThreadsPerCore int            `json:"threadsPerCore"`
	Offline        string         `json:"offline,omitempty"`
	CPUs           []topology.CPU `json:"cpus"` // online CPUs, by ID
	// Isolation is what the host isolated at boot (isolcpus=, nohz_full=, rcu_nocbs=); nil: nothing.
	Isolation *topology.IsolationLists `json:"isolation,omitempty"`
}

// Pool is one CPU pool and how much of it is handed out.
type Pool struct {
	Name     string              `json:"name"`
	Type     allocation.PoolType `json:"type"` // exclusive, shared or default
	HTPolicy string              `json:"hyperThreadingPolicy,omitempty"`
	CPUs     string              `json:"cpus"`
	// Offline: the pool's CPUs that are offline now (left out of CPUs: the pool is degraded).
	Offline string `json:"offlineCPUs,omitempty"`
	// Exclusive pools: the CPUs the host isolated, and the pool's isolatedCPUs (prefer, require).
	HostIsolated string `json:"hostIsolatedCPUs,omitempty"`
	IsolatedCPUs string `json:"isolatedCPUs,omitempty"`
	// Exclusive pools: CPUs given to containers, siblings kept idle (singleThreaded), and
	// the rest.
	Allocated string `json:"allocatedCPUs,omitempty"`
	Idled     string `json:"idledCPUs,omitempty"`
	Free      string `json:"freeCPUs,omitempty"`
	// Shared pool: millicpu granted to containers, of MilliCPUCapacity (1000 per CPU).
	MilliCPUGranted  int64 `json:"milliCPUGranted,omitempty"`
	MilliCPUCapacity int64 `json:"milliCPUCapacity,omitempty"`
	// Containers that run on the pool (a container with exclusive CPUs and a shared share
	// counts in both pools).
	Containers int `json:"containers"`
}

// Container is one container the agent placed, with what extensions set for it.
type Container struct {
	Namespace string              `json:"namespace"`
	Pod       string              `json:"pod"`
	PodUID    string              `json:"podUID,omitempty"`
	Container string              `json:"container"`
	Pool      string              `json:"pool"` // "" when only an extension knows the container
	Type      allocation.PoolType `json:"type,omitempty"`
	// CPUs is the container's cpuset: its exclusive CPUs (plus the shared pool with a
	// share), the shared pool, or the default pool.
	CPUs       string `json:"cpus,omitempty"`
	Exclusive  string `json:"exclusiveCPUs,omitempty"`
	Idled      string `json:"idledCPUs,omitempty"`
	SharedPool string `json:"sharedPool,omitempty"`
	MilliCPU   int64  `json:"milliCPU,omitempty"`
	// Group is the core-scheduling group and CookieState its cookie's state (ok, none,
	// unsupported, guard-failed, failed), from the "coresched" section.
	Group       string `json:"group,omitempty"`
	CookieState string `json:"cookieState,omitempty"`
	// EPC is the SGX EPC limit and use, from the "epc" section.
	EPC *EPCContainer `json:"epc,omitempty"`
}

// Name is "namespace/pod/container".
func (c Container) Name() string { return c.Namespace + "/" + c.Pod + "/" + c.Container }

// Kernel is what the node's kernel offers podfence.
type Kernel struct {
	// SMT: the topology has more than one thread per core; Detail holds the kernel's
	// smt/control when it has one.
	SMT Feature `json:"smt"`
	// CoreScheduling: prctl(PR_SCHED_CORE) can make cookies here.
	CoreScheduling Feature `json:"coreScheduling"`
	Cgroup         Cgroup  `json:"cgroup"`
	// SGXEPC: the misc controller lists sgx_epc in misc.capacity.
	SGXEPC           Feature `json:"sgxEPC"`
	EPCCapacityBytes uint64  `json:"sgxEPCCapacityBytes,omitempty"`
}

// Feature is one kernel capability: whether podfence can use it, and what it found.
type Feature struct {
	Available bool   `json:"available"`
	Detail    string `json:"detail,omitempty"`
}

// Cgroup is the node's cgroup layout.
type Cgroup struct {
	Version     string   `json:"version"`          // v1, v2 or unknown
	Driver      string   `json:"driver,omitempty"` // cgroupfs, systemd, or "" when unknown
	Controllers []string `json:"controllers,omitempty"`
	Detail      string   `json:"detail,omitempty"`
}

// PendingPoolConfig is a pool config waiting for the containers that block it to end.
type PendingPoolConfig struct {
	Source   string    `json:"source"`
	Since    time.Time `json:"since"`
	Blocking []Blocker `json:"blocking"`
}

// Blocker is a running container that would have to move under a pending pool config.
type Blocker struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Reason    string `json:"reason"`
}
