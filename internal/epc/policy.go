package epc

import (
	"errors"
	"fmt"
)

// Policy says what to do with a limit the node cannot enforce. The zero Policy is Strict.
type Policy int

const (
	// Strict refuses a container whose limit the node cannot enforce.
	Strict Policy = iota
	// BestEffort runs it without the cap and reports the limit as unenforced.
	BestEffort
)

// ParsePolicy reads "strict" or "best-effort".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "strict":
		return Strict, nil
	case "best-effort":
		return BestEffort, nil
	}
	return Strict, fmt.Errorf("EPC policy %q: want strict or best-effort", s)
}

func (p Policy) String() string {
	if p == BestEffort {
		return "best-effort"
	}
	return "strict"
}

// Set and Type make *Policy a command-line flag value (pflag.Value).
func (p *Policy) Set(s string) error {
	v, err := ParsePolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func (*Policy) Type() string { return "policy" }

// Node is what a node's capability probe found.
type Node struct {
	// Supported: the root cgroup's misc.capacity lists sgx_epc.
	Supported bool
	// Unified: cgroup v2, where the runtime writes misc.max from the OCI spec's unified
	// resources. Otherwise (cgroup v1, misc as its own hierarchy) the agent writes it.
	Unified bool
	// Reason says why the node is not Supported, naming the file read ("/sys/fs/cgroup/
	// misc.capacity lists no sgx_epc").
	Reason string
}

// Mode is how a container's limit is applied.
type Mode int

const (
	// None: the container has no limit.
	None Mode = iota
	// ViaUnified: set misc.max in the container's OCI unified resources (cgroup v2).
	ViaUnified
	// ViaWrite: write misc.max into the container's misc cgroup before it starts (cgroup v1).
	ViaWrite
	// Unenforced: best effort on a node that cannot cap the EPC; the container runs uncapped.
	Unenforced
)

var modeNames = [...]string{None: "none", ViaUnified: "unified", ViaWrite: "write", Unenforced: "unenforced"}

func (m Mode) String() string {
	if m < 0 || int(m) >= len(modeNames) {
		return fmt.Sprintf("Mode(%d)", int(m))
	}
	return modeNames[m]
}

// ErrUnsupported: the node's kernel cannot cap the SGX EPC through the misc controller.
var ErrUnsupported = errors.New("the kernel lacks SGX EPC cgroup support")

// UnifiedKey is the OCI unified resource (and cgroup v2 file) that holds the cap.
const UnifiedKey = "misc.max"

// ConflictError: misc.max is already set in the container's unified resources, by the
// runtime or an earlier NRI plugin; podfence does not take it over.
type ConflictError struct {
	Value string // what is set
	Limit Limit  // what podfence would set
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s is already set to %q in the container's unified cgroup resources (by the runtime "+
		"or an NRI plugin that ran earlier), and podfence would set %q: one owner per cgroup file, so remove "+
		"the other setting or the epc-limit annotation", UnifiedKey, e.Value, e.Limit.MiscMax())
}

// Plan says how limit l is applied on node n under policy p, given the unified cgroup
// resources the container already carries. It refuses a limit the node cannot enforce
// under Strict (wrapping ErrUnsupported) and a misc.max owned by someone else
// (*ConflictError).
func Plan(l Limit, n Node, p Policy, unified map[string]string) (Mode, error) {
	switch {
	case !l.IsSet():
		return None, nil
	case !n.Supported && p == BestEffort:
		return Unenforced, nil
	case !n.Supported:
		return None, fmt.Errorf("%w: %s; it needs a kernel whose misc cgroup controller lists %s in "+
			"misc.capacity (or the agent's EPC policy best-effort, which runs the container without the cap)",
			ErrUnsupported, n.Reason, Resource)
	}
	if v, ok := unified[UnifiedKey]; ok {
		return None, &ConflictError{Value: v, Limit: l}
	}
	if n.Unified {
		return ViaUnified, nil
	}
	return ViaWrite, nil
}
