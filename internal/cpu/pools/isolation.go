package pools

import (
	"fmt"
	"slices"
	"strings"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// Isolation is what an exclusive pool keeps off its containers' CPUs while they run, beyond
// the cpuset (package isolation enforces it). A pod may ask for the same per pod
// (podapi.AnnotationIRQLoadBalancing, podapi.AnnotationCPULoadBalancing).
type Isolation struct {
	// IRQLoadBalancing Disable keeps movable device interrupts off the CPUs (irqLoadBalancing).
	IRQLoadBalancing Balancing
	// CPULoadBalancing Disable puts the container in an isolated cpuset partition: no load
	// balancing, unbound kernel work kept away (cpuLoadBalancing).
	CPULoadBalancing Balancing
	// IsolatedCPUs says how exclusive CPUs are chosen among those the kernel isolated at boot
	// (isolcpus=, nohz_full=): "" takes them as any other, Prefer first, Require only them.
	IsolatedCPUs IsolatedCPUs
	// Policy is what a node that cannot isolate does: BestEffort (the default) runs the
	// container and reports it degraded, Required refuses it with the reason.
	Policy IsolationPolicy
}

// Balancing is a pool's irqLoadBalancing or cpuLoadBalancing: Disable, Enable, or "" (as
// Enable: each pod may still ask by annotation).
type Balancing string

const (
	Disable Balancing = "disable"
	Enable  Balancing = "enable"
)

// IsolatedCPUs is a pool's isolatedCPUs choice.
type IsolatedCPUs string

const (
	PreferIsolated  IsolatedCPUs = "prefer"
	RequireIsolated IsolatedCPUs = "require"
)

// IsolationPolicy is a pool's isolationPolicy.
type IsolationPolicy string

const (
	BestEffort IsolationPolicy = "best-effort"
	Required   IsolationPolicy = "required"
)

// Any says whether the pool asks for any isolation beyond the cpuset.
func (i Isolation) Any() bool {
	return i.IRQLoadBalancing == Disable || i.CPULoadBalancing == Disable || i.IsolatedCPUs != ""
}

// isolationFields are the pool fields of Isolation, for errors.
var isolationFields = []string{"irqLoadBalancing", "cpuLoadBalancing", "isolatedCPUs", "isolationPolicy"}

// parseIsolation reads a pool's isolation fields as written; validateIsolation checks them.
func parseIsolation(rp *rawPool) Isolation {
	return Isolation{IRQLoadBalancing: Balancing(rp.IRQLoadBalancing), CPULoadBalancing: Balancing(rp.CPULoadBalancing),
		IsolatedCPUs: IsolatedCPUs(rp.IsolatedCPUs), Policy: IsolationPolicy(rp.IsolationPolicy)}
}

// validateIsolation returns p's problems with its isolation fields: unknown values, and any
// of them on a pool that is not exclusive (only exclusive CPUs can be kept alone).
func (c *Config) validateIsolation(p Pool) []error {
	var errs []error
	field := func(name, value string, allowed ...string) {
		if value == "" {
			return
		}
		if TypeOf(p.Name) != allocation.TypeExclusive {
			errs = append(errs, &ConfigError{Source: c.Source, Pool: p.Name, Field: name, Value: value, Reason: fmt.Sprintf(
				"only an exclusive pool keeps CPUs alone (a %s pool shares its CPUs; leave %s unset, or name the pool %s...)",
				TypeOf(p.Name), name, exclusivePrefix)})
			return
		}
		if !slices.Contains(allowed, value) {
			errs = append(errs, &ConfigError{Source: c.Source, Pool: p.Name, Field: name, Value: value, Reason: fmt.Sprintf(
				"unknown value (allowed: %s; unset means %s)", strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])})
		}
	}
	i := p.Isolation
	field("irqLoadBalancing", string(i.IRQLoadBalancing), string(Disable), string(Enable),
		"enable (each pod may still ask with annotation podfence.io/irq-load-balancing: disable)")
	field("cpuLoadBalancing", string(i.CPULoadBalancing), string(Disable), string(Enable),
		"enable (each pod may still ask with annotation podfence.io/cpu-load-balancing: disable)")
	field("isolatedCPUs", string(i.IsolatedCPUs), string(PreferIsolated), string(RequireIsolated),
		"CPUs the kernel isolated are taken as any other")
	field("isolationPolicy", string(i.Policy), string(BestEffort), string(Required), string(BestEffort))
	return errs
}

// fields writes the isolation fields set, as flow YAML after a pool's others (ConfigText).
func (i Isolation) fields() string {
	var b strings.Builder
	values := []string{string(i.IRQLoadBalancing), string(i.CPULoadBalancing), string(i.IsolatedCPUs), string(i.Policy)}
	for n, name := range isolationFields { // in the same order
		if values[n] != "" {
			fmt.Fprintf(&b, ", %s: %s", name, values[n])
		}
	}
	return b.String()
}
