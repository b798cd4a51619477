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

// ApplyAt says when the agent sets a cap on cgroup v2. The zero ApplyAt is AtCreate.
type ApplyAt int

const (
	// AtCreate puts misc.max in the container's NRI adjustment at CreateContainer; the
	// runtime writes it when it creates the cgroup. A later NRI plugin that sets misc.max
	// too makes NRI fail the container (one owner per field).
	AtCreate ApplyAt = iota
	// AtStart claims nothing at CreateContainer and writes misc.max into the container's
	// cgroup at StartContainer (the cgroup exists, the entrypoint has not run), unless an NRI
	// plugin set it meanwhile: for a node where another plugin (nri-plugins sgx-epc at its
	// default index 90) runs after the agent.
	AtStart
)

// ParseApplyAt reads "create" or "start".
func ParseApplyAt(s string) (ApplyAt, error) {
	switch s {
	case "create":
		return AtCreate, nil
	case "start":
		return AtStart, nil
	}
	return AtCreate, fmt.Errorf("EPC apply-at %q: want create or start", s)
}

func (a ApplyAt) String() string {
	if a == AtStart {
		return "start"
	}
	return "create"
}

// Set and Type make *ApplyAt a command-line flag value (pflag.Value).
func (a *ApplyAt) Set(s string) error {
	v, err := ParseApplyAt(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

func (*ApplyAt) Type() string { return "create|start" }

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
	// ViaStart: write misc.max into the container's cgroup at StartContainer unless an NRI
	// plugin set it (cgroup v2, AtStart).
	ViaStart
	// Yielded: misc.max is already set in the container's unified resources, by the runtime
	// or an NRI plugin that ran earlier (nri-plugins sgx-epc): its owner caps the container
	// and the agent stands aside.
	Yielded
)

var modeNames = [...]string{None: "none", ViaUnified: "unified", ViaWrite: "write", Unenforced: "unenforced",
	ViaStart: "start", Yielded: "yielded"}

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

// SetBy returns the misc.max value in a container's unified cgroup resources, set by the
// runtime or an NRI plugin; ok is false when none is.
func SetBy(unified map[string]string) (value string, ok bool) {
	value, ok = unified[UnifiedKey]
	return value, ok
}

// Plan says how limit l is applied on node n under policy p at time at, given the unified
// cgroup resources the container already carries. A misc.max there has another owner, which
// the agent leaves it to (Yielded), whether or not the node supports limits: the owner's
// setting stands or fails alone. Otherwise a limit the node cannot enforce is refused under
// Strict (wrapping ErrUnsupported).
func Plan(l Limit, n Node, p Policy, at ApplyAt, unified map[string]string) (Mode, error) {
	_, owned := SetBy(unified)
	switch {
	case !l.IsSet():
		return None, nil
	case owned:
		return Yielded, nil
	case !n.Supported && p == BestEffort:
		return Unenforced, nil
	case !n.Supported:
		return None, fmt.Errorf("%w: %s; it needs a kernel whose misc cgroup controller lists %s in "+
			"misc.capacity (or the agent's EPC policy best-effort, which runs the container without the cap)",
			ErrUnsupported, n.Reason, Resource)
	case n.Unified && at == AtStart:
		return ViaStart, nil
	case n.Unified:
		return ViaUnified, nil
	}
	return ViaWrite, nil
}
