package topology

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/utils/cpuset"
)

// maxCmdline bounds the kernel command line read (the kernel's own limit is a few KiB).
const maxCmdline = 64 << 10

// CmdlineIsolation reads isolcpus=, nohz_full= and rcu_nocbs= from a kernel command line
// (/proc/cmdline) as the kernel does: parameters split at white space outside double quotes,
// '-' and '_' alike in names, nothing after "--" (init's arguments); isolcpus= takes flags
// (domain, nohz, managed_irq; none means domain) before its CPU list. present are the CPUs the
// kernel knows: "all" and "N" in a list stop at the highest, and CPUs outside it are left out.
//
// It never fails: a value the kernel would reject or that names absent CPUs is a warning
// (and, rejected, counts for nothing, as in the kernel). A parameter given twice counts each
// time, with a warning.
func CmdlineIsolation(cmdline string, present cpuset.CPUSet) HostIsolation {
	h := cmdlineIsolation(cmdline, present)
	h.RCUNoCBs = h.RCUNoCBs.Union(h.NoHZFull) // NO_HZ_FULL selects RCU_NOCB_CPU and offloads them
	return h
}

// cmdlineIsolation is CmdlineIsolation without the nohz_full CPUs in RCUNoCBs.
func cmdlineIsolation(cmdline string, present cpuset.CPUSet) HostIsolation {
	h := NoIsolation()
	if len(cmdline) > maxCmdline {
		h.Warnings = append(h.Warnings, fmt.Sprintf("kernel command line is %d bytes long: only the first %d are read",
			len(cmdline), maxCmdline))
		cmdline = cmdline[:maxCmdline]
	}
	last := -1
	if ids := present.List(); len(ids) > 0 {
		last = ids[len(ids)-1]
	}
	seen := map[string]int{}
	for _, arg := range splitCmdline(cmdline) {
		name, value, hasValue := strings.Cut(arg, "=")
		name = strings.ReplaceAll(name, "-", "_")
		if name != "isolcpus" && name != "nohz_full" && name != "rcu_nocbs" {
			continue
		}
		if seen[name]++; seen[name] == 2 {
			h.Warnings = append(h.Warnings, fmt.Sprintf("kernel command line: %s= is given more than once; podfence counts "+
				"the CPUs of each, the kernel may have kept only the first", name))
		}
		if name == "rcu_nocbs" && !hasValue { // offloading can be switched at run time; none is at boot
			continue
		}
		var f isolFlags
		var cpus cpuset.CPUSet
		var notes []string
		var err error
		switch name {
		case "isolcpus":
			cpus, f, notes, err = parseIsolcpus(value, last)
		case "nohz_full":
			f.nohz = true
			cpus, err = ParseKernelCPUList(value, last)
		case "rcu_nocbs":
			cpus, err = ParseKernelCPUList(value, last)
		}
		for _, n := range notes {
			h.Warnings = append(h.Warnings, fmt.Sprintf("kernel command line %s: %s", quoteArg(arg), n))
		}
		if err != nil {
			h.Warnings = append(h.Warnings, fmt.Sprintf("kernel command line %s: %v; the kernel ignores it, so does podfence",
				quoteArg(arg), err))
			continue
		}
		if absent := cpus.Difference(present); absent.Size() > 0 {
			h.Warnings = append(h.Warnings, fmt.Sprintf("kernel command line %s: CPUs %s are not present on this node "+
				"(present: %s); left out", quoteArg(arg), absent, present))
			cpus = cpus.Intersection(present)
		}
		switch {
		case name == "rcu_nocbs":
			h.RCUNoCBs = h.RCUNoCBs.Union(cpus)
		default:
			if f.domain {
				h.Domain = h.Domain.Union(cpus)
			}
			if f.nohz {
				h.NoHZFull = h.NoHZFull.Union(cpus)
			}
			if f.managedIRQ {
				h.ManagedIRQ = h.ManagedIRQ.Union(cpus)
			}
		}
	}
	return h
}

// quoteArg shows a command line argument in a message, cut when long.
func quoteArg(arg string) string {
	if len(arg) > 80 {
		arg = arg[:77] + "..."
	}
	return strconv.Quote(arg)
}

// splitCmdline splits a kernel command line into arguments as the kernel's next_arg does:
// at white space outside double quotes, quotes dropped. It stops at "--".
func splitCmdline(s string) []string {
	var out []string
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return out
		}
		end, quoted := len(s), false
		for i, r := range s {
			if r == '"' {
				quoted = !quoted
			} else if unicode.IsSpace(r) && !quoted {
				end = i
				break
			}
		}
		arg := strings.ReplaceAll(s[:end], `"`, "")
		s = s[end:]
		if arg == "--" {
			return out
		}
		out = append(out, arg)
	}
}

// isolFlags are the isolcpus= flags that apply.
type isolFlags struct{ domain, nohz, managedIRQ bool }

// parseIsolcpus parses an isolcpus= value, "[flag,...]cpulist", as the kernel's
// housekeeping_isolcpus_setup does: flags domain, nohz and managed_irq, none meaning domain;
// an unknown flag made of letters and '_' is skipped (a note says so), any other word before
// the list makes the whole value invalid. The list is read by ParseKernelCPUList with last.
func parseIsolcpus(v string, last int) (cpus cpuset.CPUSet, f isolFlags, notes []string, err error) {
	rest := v
	for rest != "" && isLetter(rest[0]) {
		word, after, ok := strings.Cut(rest, ",")
		switch word {
		case "domain":
			f.domain = true
		case "nohz":
			f.nohz = true
		case "managed_irq":
			f.managedIRQ = true
		default:
			if strings.TrimFunc(word, func(r rune) bool { return r < 0x80 && (isLetter(byte(r)) || r == '_') }) != "" {
				return cpuset.New(), f, notes, fmt.Errorf("flag %q: want domain, nohz or managed_irq, then a CPU list", word)
			}
			notes = append(notes, fmt.Sprintf("unknown flag %q skipped, as the kernel skips it (known: domain, nohz, managed_irq)", word))
		}
		if !ok {
			return cpuset.New(), f, notes, fmt.Errorf("no CPU list after the flags (want [flag,...]cpulist, e.g. isolcpus=domain,2-5)")
		}
		rest = after
	}
	if !f.domain && !f.nohz && !f.managedIRQ {
		f.domain = true
	}
	cpus, err = ParseKernelCPUList(rest, last)
	return cpus, f, notes, err
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// ParseKernelCPUList parses a CPU list as the kernel reads boot parameters (lib/bitmap.c,
// bitmap_parselist): regions separated by commas or white space, each N, N-M, or N-M:U/G
// (the first U CPUs of every group of G from N to M); "all" is 0-last (a pattern may
// follow, "all:1/2"), and "N" as a number is last. last is the highest CPU the kernel knows
// (-1: none; then "all" and "N" are errors). Errors name the region.
func ParseKernelCPUList(s string, last int) (cpuset.CPUSet, error) {
	// reach[lo] is one past the end of the widest plain range from lo (see ParseCPUList);
	// patterned regions are few and expanded into in.
	var reach [MaxCPUID + 1]uint16
	var in [MaxCPUID + 1]bool
	patterns := map[string]bool{}
	for _, reg := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		lo, hi, used, group, err := parseRegion(reg, last)
		if err != nil {
			return cpuset.New(), fmt.Errorf("cpu list %q: region %q: %w", s, reg, err)
		}
		if used == group {
			reach[lo] = max(reach[lo], uint16(hi+1))
			continue
		}
		if patterns[reg] {
			continue
		}
		patterns[reg] = true
		for start := lo; start <= hi; start += group {
			for id := start; id < start+used && id <= hi; id++ {
				in[id] = true
			}
		}
	}
	var ids []int
	for id, end := 0, 0; id <= MaxCPUID; id++ {
		if end = max(end, int(reach[id])); id < end || in[id] {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...), nil
}

// parseRegion parses one region of a kernel CPU list; used/group is 1/1 without a pattern.
func parseRegion(reg string, last int) (lo, hi, used, group int, err error) {
	span, pattern, hasPattern := strings.Cut(reg, ":")
	if span == "all" {
		if last < 0 {
			return 0, 0, 0, 0, fmt.Errorf(`"all" on a node without CPUs`)
		}
		lo, hi = 0, last
	} else {
		a, b, isRange := strings.Cut(span, "-")
		if lo, err = kernelNum(a, last); err != nil {
			return
		}
		hi = lo
		if isRange {
			if hi, err = kernelNum(b, last); err != nil {
				return
			}
		}
		if hi < lo {
			return 0, 0, 0, 0, fmt.Errorf("range end %d is below its start %d", hi, lo)
		}
	}
	used, group = 1, 1
	if hasPattern {
		u, g, ok := strings.Cut(pattern, "/")
		if !ok {
			return 0, 0, 0, 0, fmt.Errorf("pattern %q: want used/group, e.g. 0-15:2/4", pattern)
		}
		if used, err = kernelNum(u, -1); err != nil {
			return
		}
		if group, err = kernelNum(g, -1); err != nil {
			return
		}
		if group == 0 || used > group {
			return 0, 0, 0, 0, fmt.Errorf("pattern %q: want used/group with 0 < group and used <= group", pattern)
		}
	}
	return lo, hi, used, group, nil
}

// kernelNum is a decimal up to MaxCPUID, or "N" for last (when last >= 0).
func kernelNum(s string, last int) (int, error) {
	if s == "N" && last >= 0 {
		return last, nil
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number (want a decimal from 0 to %d, or N for the last CPU)", s, MaxCPUID)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCPUID {
		return 0, fmt.Errorf("%s is above the largest CPU ID allowed (%d)", s, MaxCPUID)
	}
	return n, nil
}
