package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Readers of the guest's cgroup v2 files and /proc. Each returns the text read, or a
// marker ("<absent>", "<unset>", "<error: ...>") that no wanted value equals, so a failed
// read shows in the FAIL line.

const cgroupRoot = "/sys/fs/cgroup"

// cgroupOf returns the cgroup v2 path of a process (the "0::" line of /proc/<pid>/cgroup).
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	return parseCgroupV2(b)
}

// parseCgroupV2 finds the unified hierarchy's path in a /proc/<pid>/cgroup file
// ("hierarchy-ID:controller-list:path" lines; cgroups(7)): the line "0::<path>".
func parseCgroupV2(b []byte) (string, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, nil
		}
	}
	return "", fmt.Errorf("no cgroup v2 line \"0::/path\" in %.80q", b)
}

// cgFile reads a cgroup interface file of cgroup path, trimmed.
func cgFile(path, name string) string {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, path, name))
	switch {
	case os.IsNotExist(err):
		return "<absent>"
	case err != nil:
		return fmt.Sprintf("<error: %v>", err)
	}
	return strings.TrimSpace(string(b))
}

// statusField returns a field of /proc/<pid>/status, e.g. Cpus_allowed_list.
func statusField(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return fmt.Sprintf("<error: %v>", err)
	}
	v, ok := parseStatus(b, key)
	if !ok {
		return "<absent>"
	}
	return v
}

// parseStatus finds "Key:\tvalue" in a proc(5) status file.
func parseStatus(b []byte, key string) (string, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && k == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// environ returns variable key of a process's initial environment, or "<unset>".
func environ(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return fmt.Sprintf("<error: %v>", err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(key+"=")); ok {
			return string(v)
		}
	}
	return "<unset>"
}

// cmdline returns a process's arguments joined by spaces.
func cmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

// procs lists the processes of cgroup path (cgroup.procs).
func procs(path string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, path, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	return parseIDs(b)
}

// tasks lists the threads of the processes pids (/proc/<pid>/task), sorted; processes
// that exit meanwhile are left out.
func tasks(pids ...int) []int {
	var tids []int
	for _, pid := range pids {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, tid)
			}
		}
	}
	sort.Ints(tids)
	return tids
}

// parseIDs reads whitespace-separated positive decimal IDs (cgroup.procs, cgroup.threads).
func parseIDs(b []byte) ([]int, error) {
	var ids []int
	for _, f := range strings.Fields(string(b)) {
		id, err := strconv.Atoi(f)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("ID %q: want a positive decimal number", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// findLine returns the first line of file after byte offset off that matches re.
func findLine(file string, off int64, re interface{ MatchString(string) bool }) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil || int64(len(b)) < off {
		return "", false
	}
	for _, line := range strings.Split(string(b[off:]), "\n") {
		if re.MatchString(line) {
			return line, true
		}
	}
	return "", false
}

// cpuMaxOf turns the agent's "decision" log line (quota=<µs> period=<µs>; quota 0: none)
// into the cpu.max the kernel should show: "<quota> <period>", or "max 100000".
func cpuMaxOf(decision string) (string, error) {
	var quota, period int64 = -1, -1
	for _, f := range strings.Fields(decision) {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case (k == "quota" || k == "period") && (err != nil || n < 0):
			return "", fmt.Errorf("decision %q: %s %q: want a non-negative number", decision, k, v)
		case k == "quota":
			quota = n
		case k == "period":
			period = n
		}
	}
	switch {
	case quota < 0 || period < 0:
		return "", fmt.Errorf("decision %q: want quota=<µs> period=<µs>", decision)
	case quota == 0:
		return "max 100000", nil
	}
	return fmt.Sprintf("%d %d", quota, period), nil
}
