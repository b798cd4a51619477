package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/sandbox"
	"github.com/podfence/podfence/internal/sandbox/enforce"
)

// TestSynchronizeAdopts: a restarted agent adopts the sandbox cgroup and sizes it from the
// containers as the runtime reports them (with podfence's adjustments); stopped containers
// and other runtimes' pods do not count; a sandbox gone meanwhile loses its cgroup.
func TestSynchronizeAdopts(t *testing.T) {
	f := newFixture(t, "v1")
	ctx, pod := context.Background(), kataPod()
	if err := f.x.RunPodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	create(t, f, pod, container("c1", 0, 0, 32*mi, ""), plan.Decision{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 25000, Period: 100000})
	before := f.limits()

	restarted := f.newExtension(t)
	runc := kataPod()
	runc.Id, runc.RuntimeHandler = "other", ""
	stopped := container("c0", 500000, 100000, 0, "0-7")
	stopped.State = api.ContainerState_CONTAINER_STOPPED
	reported := container("c1", 25000, 100000, 32*mi, "1") // podfence's quota and cpuset, as the runtime shows them
	if err := restarted.Synchronize(ctx, []*api.PodSandbox{pod, runc}, []*api.Container{reported, stopped}); err != nil {
		t.Fatal(err)
	}
	if got := f.limits(); got != before || before != (limits{"1", "50000", "201326592"}) {
		t.Errorf("after the restart %+v, before %+v; want both {1 50000 201326592}", got, before)
	}
	if len(f.log.lines("event=Synchronize", "adopted=true")) != 1 {
		t.Errorf("no adoption logged:\n%s", f.log)
	}
	if err := restarted.Synchronize(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.n.Root, "cpuset", sbPath)); !os.IsNotExist(err) {
		t.Errorf("the cgroup of a sandbox gone at a resync is still there: %v", err)
	}
}

// TestFailuresReported: failures never fail a hook; they are logged with the pod and step,
// counted per pod, and cleared by the next good update.
func TestFailuresReported(t *testing.T) {
	f := newFixture(t, "v2")
	ctx, pod := context.Background(), kataPod()
	f.n.Kernel.WriteErr = map[string]error{"cpu.max": syscall.EINVAL}
	if err := f.x.RunPodSandbox(ctx, pod); err != nil {
		t.Fatalf("RunPodSandbox = %v, want no error", err)
	}
	if len(f.log.lines("level=WARN", "pod=ns/vm", "step=limits", "invalid argument")) != 1 {
		t.Errorf("no warning for the failed limit:\n%s", f.log)
	}
	metrics := func(want string) {
		t.Helper()
		err := testutil.CollectAndCompare(f.x.Collector(), strings.NewReader(want), "podfence_vm_sandbox_in_force",
			"podfence_vm_sandbox_failures_total", "podfence_vm_sandboxes", "podfence_vm_sandbox_cpu_quota_cores",
			"podfence_vm_sandbox_memory_limit_bytes", "podfence_vm_sandbox_threads")
		if err != nil {
			t.Error(err)
		}
	}
	const head = `# HELP podfence_vm_sandbox_failures_total Updates of the VM sandbox cgroup that failed, by step: cgroup (create), limits, processes (placement).
# TYPE podfence_vm_sandbox_failures_total counter
podfence_vm_sandbox_failures_total{namespace="ns",pod="vm",step="limits"} 1
# HELP podfence_vm_sandbox_in_force 1 if the VM sandbox's last update set its cgroup, limits and processes in full; else 0 (see the agent's log).
# TYPE podfence_vm_sandbox_in_force gauge
`
	const tail = `# HELP podfence_vm_sandbox_memory_limit_bytes The VM sandbox cgroup's memory limit; absent when it has none.
# TYPE podfence_vm_sandbox_memory_limit_bytes gauge
podfence_vm_sandbox_memory_limit_bytes{namespace="ns",pod="vm"} 1.6777216e+08
# HELP podfence_vm_sandbox_threads Threads of the VM sandbox's shim and hypervisor processes found in its cgroup at the last check.
# TYPE podfence_vm_sandbox_threads gauge
podfence_vm_sandbox_threads{namespace="ns",pod="vm"} 7
# HELP podfence_vm_sandboxes VM sandboxes (pods on a VM runtime handler) whose host cgroup podfence holds.
# TYPE podfence_vm_sandboxes gauge
podfence_vm_sandboxes 1
`
	const quota = `# HELP podfence_vm_sandbox_cpu_quota_cores The VM sandbox cgroup's CFS quota in CPUs (quota/period); absent when it has none.
# TYPE podfence_vm_sandbox_cpu_quota_cores gauge
podfence_vm_sandbox_cpu_quota_cores{namespace="ns",pod="vm"} 0.25
`
	metrics(quota + head + `podfence_vm_sandbox_in_force{namespace="ns",pod="vm"} 0` + "\n" + tail)

	f.n.Kernel.WriteErr = nil
	pod.Pid = 0 // a runtime that does not say: nothing to place
	create(t, f, pod, container("c1", 0, 0, 0, ""), plan.Decision{CPUs: cpuset.New(0)})
	if len(f.log.lines("step=processes", "the runtime reported no pid for the sandbox")) != 0 {
		t.Errorf("a pid 0 took the known pid's place:\n%s", f.log)
	}
	metrics(head + `podfence_vm_sandbox_in_force{namespace="ns",pod="vm"} 1` + "\n" + strings.Replace(tail,
		"podfence_vm_sandbox_memory_limit_bytes{namespace=\"ns\",pod=\"vm\"} 1.6777216e+08\n", "", 1))

	gone := kataPod()
	gone.Id, gone.Name, gone.Pid = "gone", "gone", 999
	if err := f.x.RunPodSandbox(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if len(f.log.lines("pod=ns/gone", "step=processes", "the sandbox's process 999 is gone")) != 1 {
		t.Errorf("no warning for a gone sandbox process:\n%s", f.log)
	}
}

// TestNoCgroupfs: a node without a readable cgroupfs runs VM pods unconstrained, reported.
func TestNoCgroupfs(t *testing.T) {
	log := &syncBuffer{}
	rts, _ := sandbox.ParseRuntimes([]string{"kata"})
	x := enforce.New(enforce.Config{Root: filepath.Join(t.TempDir(), "none"), Proc: "/proc", Runtimes: rts}, testLogger(log))
	if err := x.RunPodSandbox(context.Background(), kataPod()); err != nil {
		t.Fatal(err)
	}
	if len(log.lines("level=ERROR", "VM sandboxes: no cgroup layout")) != 1 || len(log.lines("level=WARN", "step=cgroup")) != 1 {
		t.Errorf("log:\n%s", log)
	}
}

// TestReusedPidNotMoved: a sandbox the runtime still lists after a restart carries the pid
// it had; when the kernel has given that pid to another process (a host daemon here), its
// threads stay where they are and the failure says why.
func TestReusedPidNotMoved(t *testing.T) {
	for _, layout := range []string{"v1", "v2"} {
		t.Run(layout, func(t *testing.T) {
			f := newFixture(t, layout)
			f.n.Spawn(500, 1, "sshd", 2, "/")
			pod := kataPod()
			pod.Pid = 500
			restarted := f.newExtension(t)
			if err := restarted.Synchronize(context.Background(), []*api.PodSandbox{pod}, nil); err != nil {
				t.Fatal(err)
			}
			for _, tid := range []int{500, 501} {
				if got := f.n.In(tid, f.n.Hierarchies()[0]); got != "/" {
					t.Errorf("thread %d of sshd moved to %s", tid, got)
				}
			}
			if len(f.log.lines("neither a runtime shim nor a shim's child")) == 0 {
				t.Errorf("the refusal is not logged:\n%s", f.log)
			}
		})
	}
}
