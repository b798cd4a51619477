package topology

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// MaxCPUID bounds CPU IDs accepted from text, so a typo such as "0-99999999" is an error
// rather than a huge set. Linux's NR_CPUS tops out at 8192.
const MaxCPUID = 8191

// ParseCPUList parses a Linux CPU list ("0-3,8,10-11", see cpuset(7)) as found in sysfs,
// cgroupfs and pool configs. Surrounding white space is ignored; "" is the empty set.
// Errors name the offending token. The cost is linear in len(s) and never depends on how
// wide or how often repeated the ranges are.
func ParseCPUList(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cpuset.New(), nil
	}
	// reach[lo] is one past the end of the widest range that starts at lo.
	var reach [MaxCPUID + 1]uint16
	first, last := MaxCPUID, 0
	for rest, more := s, true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, ",")
		lo, hi, err := parseRange(strings.TrimSpace(tok))
		if err != nil {
			return cpuset.New(), fmt.Errorf("cpu list %q: %w", s, err)
		}
		reach[lo] = max(reach[lo], uint16(hi+1))
		first, last = min(first, lo), max(last, hi)
	}
	var ids []int
	for id, end := first, 0; id <= last; id++ {
		if end = max(end, int(reach[id])); id < end {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...), nil
}

func parseRange(tok string) (int, int, error) {
	if tok == "" {
		return 0, 0, fmt.Errorf("empty entry (want N or N-M)")
	}
	a, b, isRange := strings.Cut(tok, "-")
	lo, err := parseID(a, tok)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err := parseID(b, tok)
	if err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("entry %q: range end %d is below its start %d", tok, hi, lo)
	}
	return lo, hi, nil
}

func parseID(s, tok string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("entry %q: %q is not a CPU number (want N or N-M, N a decimal from 0 to %d)", tok, s, MaxCPUID)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCPUID {
		return 0, fmt.Errorf("entry %q: CPU %s is above the largest CPU ID allowed (%d)", tok, s, MaxCPUID)
	}
	return n, nil
}
