package podapi

import (
	"errors"
	"fmt"
)

// Pod annotations that ask for isolation beyond the cpuset for the pod's containers with
// exclusive CPUs, while they run (package isolation). CRI-O's names are accepted as they are,
// so that OpenShift pods move over unchanged; when a pod carries both, they must agree.
const (
	// AnnotationIRQLoadBalancing "disable": no movable device interrupt is delivered to the
	// container's exclusive CPUs.
	AnnotationIRQLoadBalancing = "podfence.io/irq-load-balancing"
	// AnnotationCPULoadBalancing "disable": the container runs in an isolated cpuset
	// partition (no load balancing; unbound kernel work kept away).
	AnnotationCPULoadBalancing = "podfence.io/cpu-load-balancing"
	// CRIOIRQLoadBalancing and CRIOCPULoadBalancing are CRI-O's (OpenShift performance
	// profiles), aliases of the two above.
	CRIOIRQLoadBalancing = "irq-load-balancing.crio.io"
	CRIOCPULoadBalancing = "cpu-load-balancing.crio.io"
)

// Isolation is what a pod asks for its containers with exclusive CPUs beyond the cpuset.
type Isolation struct {
	NoIRQs        bool // no device interrupts on their CPUs
	NoLoadBalance bool // an isolated cpuset partition
}

// Any says whether anything is asked.
func (i Isolation) Any() bool { return i.NoIRQs || i.NoLoadBalance }

// Or is what either asks.
func (i Isolation) Or(o Isolation) Isolation {
	return Isolation{NoIRQs: i.NoIRQs || o.NoIRQs, NoLoadBalance: i.NoLoadBalance || o.NoLoadBalance}
}

const wantBalancing = `want "disable" (or "enable", the same as leaving it out; CRI-O's deprecated "true" means "disable")`

// ParseIsolation reads a pod's isolation annotations (podfence's and CRI-O's). A value other
// than disable, enable or true, or the two names of one setting disagreeing, is an
// *AnnotationError.
func ParseIsolation(annotations map[string]string) (Isolation, error) {
	var i Isolation
	var errs []error
	for _, s := range []struct {
		own, crio string
		to        *bool
	}{{AnnotationIRQLoadBalancing, CRIOIRQLoadBalancing, &i.NoIRQs}, {AnnotationCPULoadBalancing, CRIOCPULoadBalancing, &i.NoLoadBalance}} {
		var first string
		for _, key := range []string{s.own, s.crio} {
			v, ok := annotations[key]
			if !ok {
				continue
			}
			off, err := parseBalancing(v)
			if err != nil {
				errs = append(errs, &AnnotationError{Key: key, Value: v, Err: err})
				continue
			}
			if first != "" && off != *s.to {
				errs = append(errs, &AnnotationError{Key: key, Value: v, Err: fmt.Errorf("disagrees with %s=%q (its alias): "+
					"give one of them, or the same value in both", first, annotations[first])})
				continue
			}
			first, *s.to = key, off
		}
	}
	return i, errors.Join(errs...)
}

// parseBalancing reads one value: whether balancing is disabled.
func parseBalancing(v string) (bool, error) {
	switch v {
	case "disable", "true":
		return true, nil
	case "enable":
		return false, nil
	}
	return false, errors.New(wantBalancing)
}
