package pools

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// ConfigError is one problem in one pool config. Error reads like
//
//	poolconfig-a.yaml: pool "exclusive_a": cpus "0-3,99": CPU 99 is not present on this node (present CPUs: 0-47)
//
// Parts that do not apply are left out: Pool is empty for config-wide problems (and for bad
// pool names, which are in Value with Field "pool name"), Value is empty when the field is
// empty, missing or not a scalar.
type ConfigError struct {
	Source string // the config file
	Pool   string // the pool name
	Field  string // the YAML field, or "pool name"
	Value  string // the field's value (CPU lists in canonical form)
	Reason string // what is wrong and what is allowed
	Err    error  // the underlying error, if any (a CPU list or YAML error)
}

func (e *ConfigError) Error() string {
	parts := make([]string, 0, 4)
	if e.Source != "" {
		parts = append(parts, e.Source)
	}
	if e.Pool != "" {
		parts = append(parts, fmt.Sprintf("pool %q", e.Pool))
	}
	if e.Field != "" && e.Value != "" {
		parts = append(parts, fmt.Sprintf("%s %q", e.Field, e.Value))
	} else if e.Field != "" {
		parts = append(parts, e.Field)
	}
	reason := e.Reason
	if reason == "" && e.Err != nil {
		reason = e.Err.Error()
	}
	return strings.Join(append(parts, reason), ": ")
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks what can be checked without the node: a valid resourceBaseName and known
// choices, at least one pool, valid and unique names, non-empty CPU sets, known
// hyperThreadingPolicy values, no CPU in two pools, at most one shared and one default-type
// pool. It returns every problem found, as *ConfigError values joined with errors.Join.
func (c *Config) Validate() error {
	cerr := func(p Pool, field, value, format string, args ...any) error {
		return &ConfigError{Source: c.Source, Pool: p.Name, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
	}
	errs := c.validateChoices()
	if len(c.Pools) == 0 {
		return errors.Join(append(errs, &ConfigError{Source: c.Source, Field: "pools",
			Reason: `no pools defined (want at least one, such as pools: {default: {cpus: "0-1"}})`})...)
	}
	var shared, deflt string // first pool of each single-instance type
	seen := map[string]bool{}
	owner := map[int]string{} // CPU -> the first pool that holds it
	for _, p := range c.Pools {
		if why := checkName(p.Name); why != "" {
			errs = append(errs, &ConfigError{Source: c.Source, Field: "pool name", Value: p.Name, Reason: why})
			continue
		}
		if seen[p.Name] {
			errs = append(errs, cerr(p, "", "", "defined more than once"))
			continue
		}
		seen[p.Name] = true
		if p.CPUs.IsEmpty() {
			errs = append(errs, cerr(p, "cpus", "", `no CPUs (cpus is empty or missing; want a CPU list such as "2-5,8")`))
		}
		if p.HTPolicy != SingleThreaded && p.HTPolicy != MultiThreaded {
			errs = append(errs, cerr(p, "hyperThreadingPolicy", string(p.HTPolicy),
				"unknown policy (allowed: %s, %s; unset means %s)", SingleThreaded, MultiThreaded, SingleThreaded))
		}
		switch {
		case p.API != "" && p.API != DevicePlugin && p.API != DRA:
			errs = append(errs, cerr(p, "requestAPI", string(p.API), "unknown value (allowed: %s, %s; unset means %s)",
				DevicePlugin, DRA, DevicePlugin))
		case p.API == DRA && TypeOf(p.Name) == allocation.TypeDefault:
			errs = append(errs, cerr(p, "requestAPI", string(p.API), "a default-type pool is not requested "+
				"(allowed: %s, or leave it unset; only exclusive and shared pools are requested through DRA)", DevicePlugin))
		}
		errs = append(errs, c.validateIsolation(p)...)
		clash := map[string][]int{} // CPUs of p that an earlier pool holds, by that pool
		for _, cpu := range p.CPUs.List() {
			if q, taken := owner[cpu]; taken {
				clash[q] = append(clash[q], cpu)
			} else {
				owner[cpu] = p.Name
			}
		}
		for _, q := range sortedKeys(clash) {
			errs = append(errs, cerr(p, "cpus", p.CPUs.String(), "%s also in pool %q (a CPU belongs to at most one pool)",
				cpusAre(cpuset.New(clash[q]...)), q))
		}
		switch t := TypeOf(p.Name); {
		case t == allocation.TypeShared && shared != "":
			errs = append(errs, cerr(p, "", "", "more than one shared pool (also %q): a node has at most one; "+
				"pool names that start with %q make shared pools", shared, sharedPrefix))
		case t == allocation.TypeShared:
			shared = p.Name
		case t == allocation.TypeDefault && deflt != "":
			errs = append(errs, cerr(p, "", "", "more than one default-type pool (also %q): a node has at most one; "+
				"pool names that start with neither %q nor %q make default-type pools", deflt, exclusivePrefix, sharedPrefix))
		case t == allocation.TypeDefault:
			deflt = p.Name
		}
	}
	return errors.Join(errs...)
}

// validateChoices checks resourceBaseName and podfence's choices (empty means the default).
func (c *Config) validateChoices() []error {
	var errs []error
	choice := func(field, value string, allowed ...string) {
		if value != "" && !slices.Contains(allowed, value) {
			errs = append(errs, &ConfigError{Source: c.Source, Field: field, Value: value, Reason: fmt.Sprintf(
				"unknown value (allowed: %s; unset means %s)", strings.Join(allowed, ", "), allowed[0])})
		}
	}
	choice("exclusiveCPUs", string(c.ExclusiveCPUs), string(Cores), string(Threads))
	choice("unpooledCPUs", string(c.UnpooledCPUs), string(Unused), string(JoinDefault))
	choice("nodeSelectorMatch", string(c.SelectorMatch), string(AnyLabel), string(AllLabels))
	if d := c.ResourceBaseName; d != "" {
		if bad := validation.IsDNS1123Subdomain(d); len(bad) > 0 {
			errs = append(errs, &ConfigError{Source: c.Source, Field: "resourceBaseName", Value: d, Reason: "not a domain name: " +
				strings.Join(bad, "; ") + " (want the domain of the pools' extended resources, such as " + CPUPoolerDomain + ")"})
		}
	}
	return errs
}

// checkNode checks every pool's CPUs against the node: each must be present. Offline CPUs
// are no error: the pool runs degraded on its online ones (see Resolve).
func (c *Config) checkNode(present cpuset.CPUSet) error {
	var errs []error
	for _, p := range c.Pools {
		if missing := p.CPUs.Difference(present); !missing.IsEmpty() {
			errs = append(errs, &ConfigError{Source: c.Source, Pool: p.Name, Field: "cpus", Value: p.CPUs.String(),
				Reason: fmt.Sprintf("%s not present on this node (present CPUs: %s)", cpusAre(missing), orNone(present))})
		}
	}
	return errors.Join(errs...)
}

// cpusAre reads "CPU 3 is" or "CPUs 3-5 are".
func cpusAre(s cpuset.CPUSet) string {
	if s.Size() == 1 {
		return cpuNoun(s) + " is"
	}
	return cpuNoun(s) + " are"
}

// cpuNoun reads "CPU 3" or "CPUs 3-5".
func cpuNoun(s cpuset.CPUSet) string {
	if s.Size() == 1 {
		return "CPU " + s.String()
	}
	return "CPUs " + s.String()
}

func orNone(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return s.String()
}
