//go:build linux

package main

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

func uid(i int) string { return fmt.Sprintf("6f1c0d2e-0000-4000-8000-%012d", i) }

func group(g string) map[string]string { return map[string]string{"podfence.io/core-sched-group": g} }

// pools: a default-pool, a shared-pool and an exclusive-pool container (cpusets, cpu.max,
// cpuset.mems); core-scheduling groups a (two pods) and b (one pod): one cookie per group
// on every task, different between groups; crictl exec into group a gets a's cookie; an
// agent restart keeps every cookie.
func (s *scenario) pools() {
	off, err := s.a.start()
	if err != nil {
		s.r.fail("agent start", err.Error())
		return
	}
	s.logged("agent start: pools fitted to the guest", off, `msg=node .*pools="default=0 exclusive_a=2-3 shared_s=1"`)
	s.logged("agent start: core scheduling on", off, `msg="core scheduling on"`)

	a1 := s.launch(podSpec{name: "a1", uid: uid(1), labels: group("a"), ctr: []ctrSpec{{name: "app"}}})
	a2 := s.launch(podSpec{name: "a2", uid: uid(2), labels: group("a"), ctr: []ctrSpec{{name: "app"}},
		annotations: map[string]string{"podfence.io/cpu-pools": `{"app": {"shared_s": 500}}`}})
	// The exclusive CPUs as the device plugin names them (an amount in podfence.io/cpu-pools
	// would count CPUs or cores depending on the pool config's semantics).
	b1 := s.launch(podSpec{name: "b1", uid: uid(3), labels: group("b"),
		ctr: []ctrSpec{{name: "app", annotations: map[string]string{"podfence.io/exclusive-cpus": "2-3"}}}})
	if a1 == nil || a2 == nil || b1 == nil {
		return
	}
	s.cpuFacts("default pool: pod a1", a1, "0", "max 100000", "<unset>", "<unset>")
	s.cpuFacts("shared pool, 500 millicpu: pod a2", a2, "1", "50000 100000", "<unset>", "1")
	// An exclusive container's quota depends on the agent's CFS quota policy (none, or its
	// CPUs plus a margin): the kernel must hold what the agent decided.
	cpuMax := "<no decision logged>"
	if line, err := s.a.waitLog(off, `msg=decision .*pod=tenant/b1 container=app `, 10*time.Second); err == nil {
		if cpuMax, err = cpuMaxOf(line); err != nil {
			cpuMax = err.Error()
		}
	}
	s.cpuFacts("exclusive pool, CPUs 2-3 (one whole core): pod b1 (cpu.max as the agent decided)", b1, "2-3", cpuMax, "2,3", "<unset>")

	byPod, counts, err := s.groupCookie(a1, a2, b1)
	if err != nil {
		s.r.fail("core scheduling: one cookie per pod on every task", err.Error())
		return
	}
	ca, cb := byPod["a1"], byPod["b1"]
	s.r.expect(fmt.Sprintf("group a: pods a1 and a2 share one cookie on all %d tasks (pause and containers)",
		counts["a1"]+counts["a2"]),
		fact{"a1", hex(ca), hex(ca)}, fact{"a2", hex(byPod["a2"]), hex(ca)})
	s.r.expect(fmt.Sprintf("group b: pod b1 has its own cookie on all %d tasks", counts["b1"]),
		fact{"b1", hex(cb), hex(cb)}, fact{"b1 equals group a", strconv.FormatBool(cb == ca), "false"})
	s.execCookie("crictl exec into group a: the new process gets group a's cookie", a1, ca)

	off = s.a.offset()
	s.a.stop()
	if _, err := s.a.start(); err != nil {
		s.r.fail("agent restart", err.Error())
		return
	}
	s.logged("agent restart: groups restored from the tasks' cookies", off, `msg="core scheduling restored from live tasks"`)
	after, _, err := s.groupCookie(a1, a2, b1)
	if err != nil {
		s.r.fail("agent restart: cookies kept", err.Error())
	} else {
		s.r.expect("agent restart: every task keeps its cookie",
			fact{"a1", hex(after["a1"]), hex(ca)}, fact{"a2", hex(after["a2"]), hex(ca)}, fact{"b1", hex(after["b1"]), hex(cb)})
	}
	for _, p := range []*pod{a1, a2, b1} {
		if err := s.n.removePod(s.ctx, p); err != nil {
			s.r.fail("remove pod "+p.spec.name, err.Error())
		}
	}
}

func hex(c uint64) string { return fmt.Sprintf("%#x", c) }

// epc: cgroup v2 has misc but misc.capacity lists no sgx_epc. Under policy strict a
// container with an EPC limit is refused with the reason; under best-effort it runs, uncapped,
// and the agent reports it.
func (s *scenario) epc() {
	const limit = "epc-limit.nri.io/container.app"
	p := podSpec{name: "epc-strict", uid: uid(4), annotations: map[string]string{limit: "1048576"}, ctr: []ctrSpec{{name: "app"}}}
	got, err := s.n.runPod(s.ctx, p)
	switch {
	case err == nil:
		s.r.fail("EPC limit, policy strict: refused", "the container started")
	case sgxRefusal.MatchString(err.Error()):
		s.r.pass("EPC limit, policy strict: refused, naming the reason", lastLine(err.Error()))
	default:
		s.r.fail("EPC limit, policy strict: refused, naming the reason", err.Error())
	}
	if got != nil {
		_ = s.n.removePod(s.ctx, got)
	}

	s.a.stop()
	off, err := s.a.start("--epc-policy", "best-effort")
	if err != nil {
		s.r.fail("agent start (best-effort)", err.Error())
		return
	}
	p = podSpec{name: "epc-be", uid: uid(5), annotations: map[string]string{limit: "1Mi"}, ctr: []ctrSpec{{name: "app"}}}
	be := s.launch(p)
	if be == nil {
		return
	}
	c, err := s.container(be, "app")
	if err != nil {
		s.r.fail("EPC limit, policy best-effort: runs", err.Error())
		return
	}
	s.r.expect("EPC limit, policy best-effort: runs uncapped on its pool",
		fact{"cgroup", c.cgroup, path.Join(p.cgroupParent(), be.ctr["app"])},
		fact{"cpuset.cpus", cgFile(c.cgroup, "cpuset.cpus"), "0"},
		fact{"misc.max", fmt.Sprintf("%q", cgFile(c.cgroup, "misc.max")), `""`})
	s.logged("EPC limit, policy best-effort: reported as not enforced", off,
		`msg="SGX EPC limit not enforced" pod=tenant/epc-be container=app`)
	_ = s.n.removePod(s.ctx, be)
}

// vmSandbox: a pod on runtime handler kata (runc here) gets a host cgroup for its shim and
// "hypervisor" (the pause) in its pod cgroup, sized from the overhead and its containers.
func (s *scenario) vmSandbox() {
	off := s.a.offset()
	p := podSpec{name: "vm", uid: uid(6), runtime: "kata", overhead: &limits{quota: 25000, period: 100000, memory: 128 << 20}}
	vm := s.launch(p)
	if vm == nil {
		return
	}
	sb := path.Join(p.cgroupParent(), "podfence-vm-"+vm.id)
	s.logged("VM sandbox: the agent makes its cgroup at RunPodSandbox", off,
		`msg="VM sandbox cgroup" pod=tenant/vm event=RunPodSandbox cgroup=`+sb)
	s.eventually("VM sandbox, overhead only: cgroup v2 limits, shim and pause threads inside", 20*time.Second,
		func() []fact {
			return []fact{{"cpuset.cpus", cgFile(sb, "cpuset.cpus"), "0"}, {"cpuset.mems", cgFile(sb, "cpuset.mems"), "0"},
				{"cpu.max", cgFile(sb, "cpu.max"), "25000 100000"}, {"memory.max", cgFile(sb, "memory.max"), "134217728"},
				s.threadsIn(vm, sb)}
		})
	if err := s.n.addContainer(s.ctx, vm, ctrSpec{name: "c1", res: &limits{quota: 25000, period: 50000, memory: 64 << 20}}); err != nil {
		s.r.fail("VM sandbox: add c1", err.Error())
	} else {
		s.eventually("VM sandbox + c1 (500m, 64Mi): 250m+500m, 128Mi+64Mi; c1 in its own cgroup", 20*time.Second,
			func() []fact {
				c, err := s.container(vm, "c1")
				where := c.cgroup
				if err != nil {
					where = err.Error()
				}
				return []fact{{"cpu.max", cgFile(sb, "cpu.max"), "75000 100000"}, {"memory.max", cgFile(sb, "memory.max"), "201326592"},
					s.threadsIn(vm, sb), {"c1 cgroup", where, path.Join(p.cgroupParent(), vm.ctr["c1"])}}
			})
		if err := s.n.removeContainer(s.ctx, vm, "c1"); err != nil {
			s.r.fail("VM sandbox: remove c1", err.Error())
		}
		s.eventually("VM sandbox - c1: back to the overhead", 20*time.Second, func() []fact {
			return []fact{{"cpu.max", cgFile(sb, "cpu.max"), "25000 100000"}, {"memory.max", cgFile(sb, "memory.max"), "134217728"}}
		})
	}
	if err := s.n.removePod(s.ctx, vm); err != nil {
		s.r.fail("VM sandbox: remove the pod", err.Error())
	}
	s.eventually("VM sandbox: removed with its pod", 20*time.Second, func() []fact {
		_, err := os.Stat(path.Join(cgroupRoot, sb))
		return []fact{{"exists", strconv.FormatBool(err == nil), "false"}}
	})
}

// threadsIn counts the threads of the sandbox's shim (the pause's parent) and pause that
// are in cgroup sb (/proc/<pid>/task/<tid>/cgroup), as "n/m"; want: all of them.
func (s *scenario) threadsIn(p *pod, sb string) fact {
	pause, err := s.n.pid(s.ctx, p.id, true)
	if err != nil {
		return fact{"threads", err.Error(), "all"}
	}
	shim := ppid(pause)
	in, all := 0, 0
	for _, pid := range []int{shim, pause} {
		for _, tid := range tasks(pid) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/cgroup", pid, tid))
			if err != nil {
				continue // exited
			}
			all++
			if cg, err := parseCgroupV2(b); err == nil && cg == sb {
				in++
			}
		}
	}
	got := fmt.Sprintf("%d/%d", in, all)
	want := got
	if in != all || in < 2 {
		want = "all"
	}
	return fact{fmt.Sprintf("threads of shim %d (%s) and pause %d in it", shim, comm(shim), pause), got, want}
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')') // comm may hold ')'
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}
