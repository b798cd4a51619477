package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

//go:generate go run ./internal/gensysfs -out testdata/sysfs -proc testdata/procfs

// Discover reads the CPU topology from the sysfs tree mounted at root ("/sys" on a node; tests
// pass a fixture directory). It reads only plain files, described in
// https://docs.kernel.org/admin-guide/cputopology.html:
//
//	devices/system/cpu/{online,present}         (possible when present is missing)
//	devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id,thread_siblings_list}
//	devices/system/cpu/cpuN/cache/indexM/{level,type,shared_cpu_list}
//	devices/system/node/nodeK/cpulist
//
// Only online CPUs are read. A missing die_id means die 0, a missing cache directory or L3
// means L3 = Core, and a missing node directory puts every CPU on NUMA node 0. Sibling and
// cache lists are cut to online CPUs, so Core and L3 are always online CPU IDs, and siblings
// must agree (cpu0 listing 0,48 while cpu48 lists 48 alone is an error).
func Discover(root string) (*Topology, error) {
	cpuDir := filepath.Join(root, "devices", "system", "cpu")
	online, err := readCPUList(filepath.Join(cpuDir, "online"))
	if err != nil {
		return nil, err
	}
	present, err := readCPUList(filepath.Join(cpuDir, "present"))
	if errors.Is(err, fs.ErrNotExist) {
		present, err = readCPUList(filepath.Join(cpuDir, "possible"))
	}
	if err != nil {
		return nil, err
	}
	t := &Topology{Source: root, CPUs: map[int]CPU{}, Offline: present.Difference(online), Isolation: NoIsolation()}
	smt, l3 := map[int]cpuset.CPUSet{}, map[int]cpuset.CPUSet{}
	for _, id := range online.List() {
		c, err := readCPU(filepath.Join(cpuDir, fmt.Sprintf("cpu%d", id)), id, online, smt, l3)
		if err != nil {
			return nil, err
		}
		t.CPUs[id] = c
	}
	numa, err := readNUMA(filepath.Join(root, "devices", "system", "node"), online)
	if err != nil {
		return nil, err
	}
	for id, node := range numa {
		c := t.CPUs[id]
		c.NUMA = node
		t.CPUs[id] = c
	}
	if err := agree(t, smt, "thread_siblings_list", func(c CPU) int { return c.Core }); err != nil {
		return nil, fmt.Errorf("%s: %w", cpuDir, err)
	}
	if err := agree(t, l3, "L3 shared_cpu_list", func(c CPU) int { return c.L3 }); err != nil {
		return nil, fmt.Errorf("%s: %w", cpuDir, err)
	}
	return t, nil
}

// readCPU reads one online CPU's topology and L3 cache from its cpuN directory, recording
// its online sibling and L3 lists in smt and l3.
func readCPU(dir string, id int, online cpuset.CPUSet, smt, l3 map[int]cpuset.CPUSet) (CPU, error) {
	c := CPU{ID: id}
	var err error
	topo := filepath.Join(dir, "topology")
	if c.Socket, err = readInt(filepath.Join(topo, "physical_package_id")); err != nil {
		return c, err
	}
	if c.Die, err = readInt(filepath.Join(topo, "die_id")); errors.Is(err, fs.ErrNotExist) {
		c.Die = 0
	} else if err != nil {
		return c, err
	}
	// core_id repeats across packages and is not the identity, but a bad value is a bad tree.
	if _, err = readInt(filepath.Join(topo, "core_id")); err != nil {
		return c, err
	}
	if smt[id], err = readGroup(filepath.Join(topo, "thread_siblings_list"), id, online); err != nil {
		return c, err
	}
	c.Core = smt[id].List()[0]
	file, err := findL3(filepath.Join(dir, "cache"))
	if err != nil {
		return c, err
	}
	if file == "" {
		l3[id], c.L3 = smt[id], c.Core
		return c, nil
	}
	if l3[id], err = readGroup(file, id, online); err != nil {
		return c, err
	}
	c.L3 = l3[id].List()[0]
	return c, nil
}

// findL3 returns the shared_cpu_list file of the level-3 data or unified cache under dir
// (a cpuN/cache directory), or "" when there is none.
func findL3(dir string) (string, error) {
	names, err := numbered(dir, "index")
	if err != nil {
		return "", err
	}
	for _, name := range names {
		idx := filepath.Join(dir, name)
		level, err := readInt(filepath.Join(idx, "level"))
		if err != nil {
			return "", err
		}
		if level != 3 {
			continue
		}
		typ, err := readString(filepath.Join(idx, "type"))
		if err != nil {
			return "", err
		}
		if typ == "Unified" || typ == "Data" {
			return filepath.Join(idx, "shared_cpu_list"), nil
		}
	}
	return "", nil
}

// readNUMA maps each online CPU to its NUMA node from dir/nodeK/cpulist. Without nodes, the
// map is empty (every CPU on node 0); with them, each online CPU must be in exactly one node.
func readNUMA(dir string, online cpuset.CPUSet) (map[int]int, error) {
	names, err := numbered(dir, "node")
	if err != nil || len(names) == 0 {
		return map[int]int{}, err
	}
	numa := map[int]int{}
	for _, name := range names {
		node, _ := strconv.Atoi(strings.TrimPrefix(name, "node"))
		cpus, err := readCPUList(filepath.Join(dir, name, "cpulist"))
		if err != nil {
			return nil, err
		}
		for _, id := range cpus.Intersection(online).List() {
			if prev, dup := numa[id]; dup {
				return nil, fmt.Errorf("%s: cpu %d is in NUMA nodes %d and %d", dir, id, prev, node)
			}
			numa[id] = node
		}
	}
	if missing := online.Difference(cpuset.New(slices.Collect(maps.Keys(numa))...)); missing.Size() > 0 {
		return nil, fmt.Errorf("%s: online CPUs %s are in no NUMA node", dir, missing)
	}
	return numa, nil
}

// agree checks that each CPU's list (groups) holds exactly the CPUs that share its identity
// (key), so the lists of a group's members all say the same thing.
func agree(t *Topology, groups map[int]cpuset.CPUSet, what string, key func(CPU) int) error {
	ids := map[int][]int{}
	for _, id := range t.Online().List() {
		ids[key(t.CPUs[id])] = append(ids[key(t.CPUs[id])], id)
	}
	members := map[int]cpuset.CPUSet{}
	for k, list := range ids {
		members[k] = cpuset.New(list...)
	}
	for _, id := range t.Online().List() {
		if want := members[key(t.CPUs[id])]; !groups[id].Equals(want) {
			return fmt.Errorf("cpu%d %s %q disagrees with the lists that group %s", id, what, groups[id], want)
		}
	}
	return nil
}

// numbered lists the entries of dir named prefix followed by a decimal number, in numeric
// order; none when dir does not exist.
func numbered(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, unwrapPath(err))
	}
	var ids []int
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), prefix)
		if n, err := strconv.Atoi(num); ok && err == nil && n >= 0 && num == strconv.Itoa(n) {
			ids = append(ids, n)
		}
	}
	var names []string
	for _, n := range cpuset.New(ids...).List() {
		names = append(names, prefix+strconv.Itoa(n))
	}
	return names, nil
}

// readGroup reads a CPU list that must contain id and returns its online part.
func readGroup(file string, id int, online cpuset.CPUSet) (cpuset.CPUSet, error) {
	set, err := readCPUList(file)
	if err != nil {
		return set, err
	}
	if !set.Contains(id) {
		return set, fmt.Errorf("parse %s %q: does not list cpu %d itself", file, set.String(), id)
	}
	return set.Intersection(online), nil
}

func readCPUList(file string) (cpuset.CPUSet, error) {
	s, err := readString(file)
	if err != nil {
		return cpuset.New(), err
	}
	set, err := ParseCPUList(s)
	if err != nil { // ParseCPUList's error already quotes the content.
		return cpuset.New(), fmt.Errorf("parse %s: %w", file, err)
	}
	return set, nil
}

func readInt(file string) (int, error) {
	s, err := readString(file)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("parse %s %q: want a decimal integer", file, s)
	}
	return n, nil
}

func readString(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", file, unwrapPath(err))
	}
	return strings.TrimSpace(string(b)), nil
}

// unwrapPath drops the *fs.PathError layer, whose path the caller's message already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
