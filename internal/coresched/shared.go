package coresched

import (
	"fmt"
	"slices"
	"strings"
)

// SharedGroups are the labelled groups the cluster operator shares across namespaces, from
// the core-scheduling profiles: group name → the namespaces whose pods join it. A name not
// shared is namespaced. The zero value shares nothing; build it with Share, then only read
// it (a copy shares the map).
type SharedGroups struct {
	m map[string]sharers
}

// sharers are the namespaces of one shared group.
type sharers struct {
	every bool     // every namespace (a profile without namespaces)
	ns    []string // sorted; when not every
}

// Share declares group shared by namespaces, or by every namespace when none is given. A
// group shared again is shared by the union.
func (s *SharedGroups) Share(group string, namespaces ...string) {
	if s.m == nil {
		s.m = map[string]sharers{}
	}
	sh := s.m[group]
	if len(namespaces) == 0 {
		sh.every = true
	}
	sh.ns = append(sh.ns, namespaces...)
	slices.Sort(sh.ns)
	sh.ns = slices.Compact(sh.ns)
	s.m[group] = sh
}

// Sharers says who shares group: ok is false when nobody does (the name is namespaced),
// every is true when every namespace does, else namespaces lists them, sorted.
func (s SharedGroups) Sharers(group string) (namespaces []string, every, ok bool) {
	sh, ok := s.m[group]
	if !ok || sh.every {
		return nil, ok, ok
	}
	return slices.Clone(sh.ns), false, true
}

// Joins reports whether a pod of namespace ns labelled with group joins the shared group,
// rather than its namespace's group of that name.
func (s SharedGroups) Joins(group, ns string) bool {
	sh, ok := s.m[group]
	return ok && (sh.every || slices.Contains(sh.ns, ns))
}

// Len is the number of shared groups.
func (s SharedGroups) Len() int { return len(s.m) }

// String lists the shared groups for logs: "dataplane=telco tenant-a=tenant-a,tenant-a-dev
// web=*" ("*": every namespace); "" when none.
func (s SharedGroups) String() string {
	names := make([]string, 0, len(s.m))
	for g := range s.m {
		names = append(names, g)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, g := range names {
		sh := s.m[g]
		ns := strings.Join(sh.ns, ",")
		if sh.every {
			ns = "*"
		}
		parts[i] = fmt.Sprintf("%s=%s", g, ns)
	}
	return strings.Join(parts, " ")
}

// Map returns group → its namespaces, ["*"] for every namespace; nil when none is shared.
func (s SharedGroups) Map() map[string][]string {
	if len(s.m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(s.m))
	for g, sh := range s.m {
		out[g] = slices.Clone(sh.ns)
		if sh.every {
			out[g] = []string{"*"}
		}
	}
	return out
}
