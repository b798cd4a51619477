package isolation

import (
	"path"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"
)

// Exclusive returns the cpuset.cpus.exclusive each cgroup must hold for the isolated
// partitions of held (those that want NoLoadBalance, each at its Cgroup): a remote partition
// (Linux 6.7 and later) takes its CPUs through cpuset.cpus.exclusive of every ancestor but
// the root, and of itself. A cgroup under none of them is not in the map; the caller clears
// what it set there before.
func Exclusive(held []Held) map[string]cpuset.CPUSet {
	out := map[string]cpuset.CPUSet{}
	for _, h := range held {
		if !h.Want.NoLoadBalance || h.Cgroup == "" || h.Cgroup == "/" {
			continue
		}
		for _, dir := range Lineage(h.Cgroup) {
			if cur, ok := out[dir]; ok {
				out[dir] = cur.Union(h.CPUs)
			} else {
				out[dir] = h.CPUs
			}
		}
	}
	return out
}

// Lineage lists a cgroup path's ancestors below the root, outermost first, then the path:
// "/a/b/c" gives /a, /a/b, /a/b/c.
func Lineage(cgroup string) []string {
	cgroup = path.Clean("/" + cgroup)
	var out []string
	for p := cgroup; p != "/" && p != "."; p = path.Dir(p) {
		out = append(out, p)
	}
	slices.Reverse(out)
	return out
}

// TopDown sorts cgroup paths so that a parent comes before its children (the order in which
// cpuset.cpus.exclusive grows); BottomUp is the reverse (the order in which it shrinks).
func TopDown(paths []string) []string {
	out := slices.Clone(paths)
	slices.SortFunc(out, func(a, b string) int {
		if d := strings.Count(a, "/") - strings.Count(b, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return out
}

// BottomUp is TopDown reversed.
func BottomUp(paths []string) []string {
	out := TopDown(paths)
	slices.Reverse(out)
	return out
}
