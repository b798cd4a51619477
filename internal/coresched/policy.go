package coresched

import "fmt"

// Policy says what happens to a pod that explicitly asks for a group (or exclusive) on a
// node that cannot give it a cookie.
type Policy string

const (
	// Strict refuses the pod's containers at CreateContainer with the reason.
	Strict Policy = "strict"
	// BestEffort runs them without a cookie and reports it (log, metrics).
	BestEffort Policy = "best-effort"
)

// ParsePolicy checks a policy setting; "" is Strict.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Strict, BestEffort:
		return p, nil
	case "":
		return Strict, nil
	}
	return "", fmt.Errorf("core scheduling policy %q: want strict or best-effort", s)
}

// String, Set and Type make *Policy a command-line flag value (pflag.Value).
func (p Policy) String() string { return string(p) }

func (p *Policy) Set(s string) error {
	v, err := ParsePolicy(s)
	if err == nil {
		*p = v
	}
	return err
}

func (*Policy) Type() string { return "strict|best-effort" }
