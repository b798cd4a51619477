// Package isolation decides what is kept off a container's exclusive CPUs beyond its cpuset,
// while it runs: device interrupts (every movable IRQ's affinity and the default affinity
// leave its CPUs out), the scheduler's load balancing and unbound kernel work (an isolated
// cpuset partition on cgroup v2, and the unbound-workqueue cpumask). A pool asks for its
// containers (pools.Isolation), a pod for its own (podapi.Isolation). Everything here is
// pure: package isolation/enforce reads and writes the kernel's files.
package isolation

import (
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/podapi"
)

// Want is what one container with exclusive CPUs gets beyond its cpuset.
type Want struct {
	NoIRQs        bool // device interrupts kept off its CPUs
	NoLoadBalance bool // an isolated cpuset partition, unbound workqueues kept off
	// Required: a node that cannot do what is asked refuses the container (isolationPolicy:
	// required); else it runs, reported degraded.
	Required bool
}

// Any says whether anything is wanted.
func (w Want) Any() bool { return w.NoIRQs || w.NoLoadBalance }

// WantOf is what a container of pool p in a pod that asks pod gets: what either asks.
func WantOf(p pools.Isolation, pod podapi.Isolation) Want {
	w := Want{NoIRQs: p.IRQLoadBalancing == pools.Disable || pod.NoIRQs,
		NoLoadBalance: p.CPULoadBalancing == pools.Disable || pod.NoLoadBalance}
	w.Required = w.Any() && p.Policy == pools.Required
	return w
}

// Held is one running container's exclusive CPUs and what it wants for them.
type Held struct {
	ID   string // the runtime's container ID
	CPUs cpuset.CPUSet
	Want Want
	// Cgroup is the container's cgroup path ("/kubepods/.../<id>"), for its partition.
	Cgroup string
}

// NoIRQCPUs are the CPUs no device interrupt may reach: those of containers that want it.
func NoIRQCPUs(held []Held) cpuset.CPUSet {
	out := cpuset.New()
	for _, h := range held {
		if h.Want.NoIRQs {
			out = out.Union(h.CPUs)
		}
	}
	return out
}

// IsolatedCPUs are the CPUs kept from the load balancer and unbound kernel work: those of
// containers that want an isolated partition.
func IsolatedCPUs(held []Held) cpuset.CPUSet {
	out := cpuset.New()
	for _, h := range held {
		if h.Want.NoLoadBalance {
			out = out.Union(h.CPUs)
		}
	}
	return out
}
