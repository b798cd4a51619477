// Package sandbox sizes the host side of VM sandboxes (Kata Containers and the like). A
// VM-isolated runtime runs a pod's containers inside a guest; on the host the pod is a shim,
// a hypervisor and its vCPU threads. podfence puts them into one host cgroup per pod, the
// sandbox cgroup, sized from the pod's containers. This package is pure: it decides which
// pods are VM sandboxes (Runtimes), what their limits are (Size), and which host processes
// belong to one (Members). Package sandbox/host applies the result.
//
// The sizing rule, per resource (see Size):
//
//	CPU quota  Σ containers' CFS quotas, each normalised to Period, + the RuntimeClass
//	           overhead; none if any container has no CPU limit.
//	memory     Σ containers' limits + overhead; none if any container is unlimited.
//	pids       Σ containers' pids limits + overhead; none if any container has none.
//	cpuset     the union of the containers' cpusets (podfence's decisions).
//
// The empty sandbox (before its first container, or after its last) gets the overhead
// alone, on the cpuset it is given for that case (the default pool).
package sandbox

import (
	"fmt"
	"path"
	"strings"
)

// DefaultRuntimes are the runtime handler patterns of VM sandboxes unless configured:
// Kata Containers' RuntimeClass handlers (kata, kata-qemu, kata-clh, kata-fc, ...).
func DefaultRuntimes() []string { return []string{"kata", "kata-*"} }

// Runtimes is a list of runtime handler patterns, names or path.Match globs ("kata",
// "kata-*"). A pod whose runtime handler (NRI PodSandbox.RuntimeHandler) matches one is a
// VM sandbox. The zero value matches nothing; the default runtime ("") never matches.
type Runtimes struct {
	patterns []string
}

// ParseRuntimes checks each pattern and returns the list. Blank entries are skipped.
func ParseRuntimes(patterns []string) (Runtimes, error) {
	var r Runtimes
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return Runtimes{}, fmt.Errorf("runtime handler pattern %q: %w (want a name or a glob such as kata-*)", p, err)
		}
		r.patterns = append(r.patterns, p)
	}
	return r, nil
}

// Match reports whether handler names a VM runtime.
func (r Runtimes) Match(handler string) bool {
	if handler == "" {
		return false
	}
	for _, p := range r.patterns {
		if ok, _ := path.Match(p, handler); ok {
			return true
		}
	}
	return false
}

// IsEmpty reports whether no pattern is configured.
func (r Runtimes) IsEmpty() bool { return len(r.patterns) == 0 }

// String is the comma-separated list, as the --vm-runtimes flag takes it.
func (r Runtimes) String() string { return strings.Join(r.patterns, ",") }
