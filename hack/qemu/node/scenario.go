//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// scenario holds what the checks share: the runtime, the agent and the report.
type scenario struct {
	ctx context.Context
	n   *node
	a   *agent
	r   *report
}

// eventually re-reads facts until each has its wanted value or timeout passes (the agent
// and the runtime act asynchronously, slowly under TCG), then reports the last read.
func (s *scenario) eventually(check string, timeout time.Duration, read func() []fact) {
	deadline := time.Now().Add(timeout)
	for {
		facts := read()
		if allMatch(facts) || time.Now().After(deadline) {
			s.r.expect(check, facts...)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func allMatch(facts []fact) bool {
	for _, f := range facts {
		if f.got != f.want {
			return false
		}
	}
	return true
}

// logged reports whether the agent logged a line matching pattern after offset off.
func (s *scenario) logged(check string, off int64, pattern string) {
	line, err := s.a.waitLog(off, pattern, 30*time.Second)
	if err != nil {
		s.r.fail(check, err.Error())
		return
	}
	s.r.pass(check, "agent log: "+strings.TrimSpace(line))
}

// guest: the kernel facts everything else relies on.
func (s *scenario) guest() {
	ctrls := strings.Fields(cgFile("/", "cgroup.controllers"))
	var have []string
	for _, c := range []string{"cpuset", "cpu", "memory", "pids", "misc"} {
		if slices.Contains(ctrls, c) {
			have = append(have, c)
		}
	}
	capacity := cgFile("/", "misc.capacity")
	epc := "absent"
	if strings.Contains(capacity, "sgx_epc") {
		epc = "listed"
	}
	s.r.expect("guest: cgroup v2 with misc, and SMT siblings",
		fact{"controllers", strings.Join(have, ","), "cpuset,cpu,memory,pids,misc"},
		fact{"cpu0.thread_siblings_list", sysfs("cpu0"), "0-1"},
		fact{"cpu2.thread_siblings_list", sysfs("cpu2"), "2-3"},
		fact{fmt.Sprintf("misc.capacity(%q).sgx_epc", capacity), epc, "absent"})
}

func sysfs(cpu string) string {
	b, err := os.ReadFile("/sys/devices/system/cpu/" + cpu + "/topology/thread_siblings_list")
	if err != nil {
		return fmt.Sprintf("<error: %v>", err)
	}
	return strings.TrimSpace(string(b))
}

// launch runs a pod and reports a failure to do so.
func (s *scenario) launch(p podSpec) *pod {
	got, err := s.n.runPod(s.ctx, p)
	if err != nil {
		s.r.fail("run pod "+p.name, err.Error())
		return nil
	}
	return got
}

// container describes a running container from the kernel's side.
type container struct {
	pid    int
	cgroup string
}

func (s *scenario) container(p *pod, name string) (container, error) {
	if p == nil {
		return container{}, fmt.Errorf("no pod")
	}
	pid, err := s.n.pid(s.ctx, p.ctr[name], false)
	if err != nil {
		return container{}, err
	}
	cg, err := cgroupOf(pid)
	return container{pid: pid, cgroup: cg}, err
}

// cpuFacts checks a container's CPU settings as the kernel holds them: its cgroup (where
// the cgroupfs driver puts it), cpuset.cpus and .effective, cpuset.mems and .effective,
// cpu.max, the process's Cpus_allowed_list and the pool variables in its environment.
func (s *scenario) cpuFacts(check string, p *pod, cpus, cpuMax, exclusive, shared string) {
	c, err := s.container(p, "app")
	if err != nil {
		s.r.fail(check, err.Error())
		return
	}
	s.r.expect(check,
		fact{"cgroup", c.cgroup, path.Join(p.spec.cgroupParent(), p.ctr["app"])},
		fact{"cpuset.cpus", cgFile(c.cgroup, "cpuset.cpus"), cpus},
		fact{"cpuset.cpus.effective", cgFile(c.cgroup, "cpuset.cpus.effective"), cpus},
		fact{"cpuset.mems", cgFile(c.cgroup, "cpuset.mems"), "0"},
		fact{"cpuset.mems.effective", cgFile(c.cgroup, "cpuset.mems.effective"), "0"},
		fact{"cpu.max", cgFile(c.cgroup, "cpu.max"), cpuMax},
		fact{"Cpus_allowed_list", statusField(c.pid, "Cpus_allowed_list"), cpus},
		fact{"EXCLUSIVE_CPUS", environ(c.pid, "EXCLUSIVE_CPUS"), exclusive},
		fact{"SHARED_CPUS", environ(c.pid, "SHARED_CPUS"), shared})
}

// podTasks lists every thread of a pod: of the pause and of each container's processes.
func (s *scenario) podTasks(p *pod) ([]int, error) {
	pause, err := s.n.pid(s.ctx, p.id, true)
	if err != nil {
		return nil, err
	}
	pids := []int{pause}
	for name := range p.ctr {
		c, err := s.container(p, name)
		if err != nil {
			return nil, err
		}
		ps, err := procs(c.cgroup)
		if err != nil {
			return nil, err
		}
		pids = append(pids, ps...)
	}
	return tasks(pids...), nil
}

// cookies reads the cookie of every task of p: the distinct values and how many tasks.
func (s *scenario) cookies(p *pod) (distinct []uint64, n int, err error) {
	tids, err := s.podTasks(p)
	if err != nil {
		return nil, 0, err
	}
	for _, tid := range tids {
		c, err := cookie(tid)
		if err != nil {
			continue // exited
		}
		n++
		if !slices.Contains(distinct, c) {
			distinct = append(distinct, c)
		}
	}
	return distinct, n, nil
}

// groupCookie waits until every task of the pods has one non-zero cookie per pod (GET reads
// 0 until the kernel's hash key is set, and the agent gives cookies asynchronously) and
// returns each pod's cookie and task count.
func (s *scenario) groupCookie(pods ...*pod) (map[string]uint64, map[string]int, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		byPod, counts := map[string]uint64{}, map[string]int{}
		var bad []string
		for _, p := range pods {
			if p == nil {
				return nil, nil, fmt.Errorf("a pod did not run")
			}
			d, n, err := s.cookies(p)
			if err != nil {
				return nil, nil, err
			}
			counts[p.spec.name] = n
			if len(d) != 1 || d[0] == 0 {
				bad = append(bad, fmt.Sprintf("%s: cookies %s on %d tasks", p.spec.name, hexes(d), n))
				continue
			}
			byPod[p.spec.name] = d[0]
		}
		if len(bad) == 0 {
			return byPod, counts, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("after 60 s: %s", strings.Join(bad, "; "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func hexes(cs []uint64) string {
	var s []string
	for _, c := range cs {
		s = append(s, fmt.Sprintf("%#x", c))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// execCookie runs `crictl exec <container> sleep 600` into pod p's app container, finds
// the new process in the container's cgroup and waits until its cookie is want.
func (s *scenario) execCookie(check string, p *pod, want uint64) {
	c, err := s.container(p, "app")
	if err != nil {
		s.r.fail(check, err.Error())
		return
	}
	cmd := exec.CommandContext(s.ctx, binDir+"/crictl", "--config", s.n.crictlConfig, "exec", p.ctr["app"], "sleep", "600")
	cmd.Env = []string{pathEnv, "HOME=/root"}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		s.r.fail(check, err.Error())
		return
	}
	var pid int
	defer func() {
		if pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL) // crictl exec then returns
		} else {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	var got uint64
	for time.Since(start) < 60*time.Second {
		if pid == 0 {
			ps, _ := procs(c.cgroup)
			for _, q := range ps {
				if q != c.pid && cmdline(q) == "sleep 600" {
					pid = q
				}
			}
		}
		if pid != 0 {
			if got, err = cookie(pid); err == nil && got == want {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case pid == 0:
		s.r.fail(check, "no exec'd process `sleep 600` appeared in "+c.cgroup)
	case got != want:
		s.r.fail(check, fmt.Sprintf("exec'd pid %d has cookie %#x (want the group's %#x)", pid, got, want))
	default:
		s.r.pass(check, fmt.Sprintf("exec'd pid %d (in %s) has the group's cookie %#x, %.1f s after crictl exec",
			pid, c.cgroup, got, time.Since(start).Seconds()))
	}
}

var sgxRefusal = regexp.MustCompile(`lacks SGX EPC cgroup support`)
