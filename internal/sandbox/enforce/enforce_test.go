package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
)

// limits are a sandbox cgroup's values, read in a layout's files.
type limits struct{ cpus, quota, memory string }

func (f *fixture) limits() limits {
	if f.n.Layout.Version == 2 {
		return limits{f.sb("", "cpuset.cpus"), strings.Fields(f.sb("", "cpu.max"))[0], f.sb("", "memory.max")}
	}
	return limits{f.sb("cpuset", "cpuset.cpus"), f.sb("cpu,cpuacct", "cpu.cfs_quota_us"), f.sb("memory", "memory.limit_in_bytes")}
}

// TestLifecycle follows a Kata pod through the hooks: the empty sandbox, containers
// created (own quota in another period; podfence's shared quota; no CPU limit), started,
// updated and removed, and the pod removed.
func TestLifecycle(t *testing.T) {
	for _, layout := range []string{"v1", "v2"} {
		t.Run(layout, func(t *testing.T) {
			f := newFixture(t, layout)
			ctx, pod := context.Background(), kataPod()
			none := map[string]string{"v1": "-1", "v2": "max"}[layout]
			step := func(what string, want limits) {
				t.Helper()
				if got := f.limits(); got != want {
					t.Errorf("%s: sandbox cgroup %+v, want %+v", what, got, want)
				}
			}
			if err := f.x.RunPodSandbox(ctx, pod); err != nil {
				t.Fatal(err)
			}
			step("empty sandbox: the overhead on the default pool", limits{"0", "25000", "167772160"})
			for _, tid := range []int{100, 101, 102, 200, 201, 202, 203} {
				if got := f.n.In(tid, f.n.Hierarchies()[0]); got != sbPath {
					t.Errorf("thread %d in %s, want %s", tid, got, sbPath)
				}
			}

			c1 := container("c1", 25000, 50000, 64*mi, "")
			create(t, f, pod, c1, plan.Decision{CPUs: cpuset.New(0), Mems: cpuset.New(0)})
			step("c1: 25000/50000 counts as 50000/100000", limits{"0", "75000", "234881024"})
			c2 := container("c2", 0, 0, 32*mi, "")
			create(t, f, pod, c2, plan.Decision{CPUs: cpuset.New(1), Mems: cpuset.New(0), Quota: 25000, Period: 100000})
			step("c2: podfence's shared quota counts; cpusets united", limits{"0-1", "100000", "268435456"})

			f.n.Spawn(300, 100, "sleep", 1, podDir+"/c2") // c2's process, under the same shim (runc)
			c2.Pid = 300
			f.n.Spawn(400, 100, "virtiofsd", 2, "/") // a helper the shim started
			if err := f.x.StartContainer(ctx, pod, c2); err != nil {
				t.Fatal(err)
			}
			if got := f.n.In(300, f.n.Hierarchies()[0]); got != podDir+"/c2" {
				t.Errorf("the container's process moved to %s", got)
			}
			if got := f.n.In(401, f.n.Hierarchies()[0]); got != sbPath {
				t.Errorf("the shim's helper thread in %s, want the sandbox", got)
			}

			c3 := container("c3", 0, 0, 8*mi, "")
			create(t, f, pod, c3, plan.Decision{CPUs: cpuset.New(0), Mems: cpuset.New(0)})
			step("c3 without a CPU limit: no quota", limits{"0-1", none, "276824064"})
			f.x.RemoveContainer(ctx, pod, c3)
			f.x.RemoveContainer(ctx, pod, c3) // stop, then remove
			step("c3 removed", limits{"0-1", "100000", "268435456"})

			q, p, m := int64(200000), uint64(100000), int64(128*mi)
			res := &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(&q), Period: api.UInt64(&p)},
				Memory: &api.LinuxMemory{Limit: api.Int64(&m)}}
			if err := f.x.UpdateContainer(ctx, pod, c2, res); err != nil {
				t.Fatal(err)
			}
			step("c2 updated: new memory, podfence's quota kept", limits{"0-1", "100000", "369098752"})
			if err := f.x.UpdateContainer(ctx, pod, c1, res); err != nil {
				t.Fatal(err)
			}
			step("c1 updated: its own quota and memory", limits{"0-1", "250000", "436207616"})

			memDir := map[string]string{"v1": "memory", "v2": ""}[layout]
			usageFile := map[string]string{"v1": "memory.usage_in_bytes", "v2": "memory.current"}[layout]
			f.n.SetFile(filepath.Join(memDir, sbPath, usageFile), "390000000\n")
			f.x.RemoveContainer(ctx, pod, c1)
			step("c1 removed while the VM uses more than the rest: memory kept", limits{"1", "50000", "436207616"})
			if len(f.log.lines("level=WARN", "memory limit kept", "want=301989888", "usage=390000000", "kept=436207616")) != 1 {
				t.Errorf("no memory-kept warning:\n%s", f.log)
			}

			f.x.RemovePodSandbox(ctx, pod)
			for _, h := range f.n.Hierarchies() {
				if h == "misc" {
					continue
				}
				if _, err := os.Stat(filepath.Join(f.n.Root, h, sbPath)); !os.IsNotExist(err) {
					t.Errorf("sandbox cgroup still in %q: %v", h, err)
				}
				if got := f.n.In(200, h); got != podDir {
					t.Errorf("hypervisor in %s after removal, want the pod's cgroup", got)
				}
			}
			if len(f.log.lines("VM sandbox cgroup removed", "stragglersMoved=3")) != 1 {
				t.Errorf("no removal log line:\n%s", f.log)
			}
		})
	}
}

func create(t *testing.T, f *fixture, pod *api.PodSandbox, ctr *api.Container, d plan.Decision) {
	t.Helper()
	adj, err := f.x.CreateContainer(context.Background(), pod, ctr, d)
	if adj != nil || err != nil {
		t.Fatalf("CreateContainer = %v, %v; want no adjustment and no error", adj, err)
	}
}

// TestOtherRuntimes: pods on other handlers are left alone.
func TestOtherRuntimes(t *testing.T) {
	f := newFixture(t, "v1")
	ctx := context.Background()
	for _, handler := range []string{"", "runc", "katana"} {
		pod := kataPod()
		pod.RuntimeHandler = handler
		if err := f.x.RunPodSandbox(ctx, pod); err != nil {
			t.Fatal(err)
		}
		create(t, f, pod, container("c1", 1000, 100000, mi, ""), plan.Decision{CPUs: cpuset.New(0)})
		if err := f.x.StartContainer(ctx, pod, container("c1", 0, 0, 0, "")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.n.Root, "cpuset", sbPath)); !os.IsNotExist(err) {
		t.Errorf("a sandbox cgroup for a runc pod: %v", err)
	}
	if len(f.n.Kernel.Writes()) != 0 {
		t.Errorf("writes for runc pods: %q", f.n.Kernel.Writes())
	}
}

// TestContainerInstances: a container created again under its name (after a refusal
// further down the agent, or a restart) replaces its earlier instance, which a late
// removal of that instance does not take out.
func TestContainerInstances(t *testing.T) {
	f := newFixture(t, "v1")
	ctx, pod := context.Background(), kataPod()
	if err := f.x.RunPodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	first := container("c1", 50000, 100000, 64*mi, "")
	create(t, f, pod, first, plan.Decision{CPUs: cpuset.New(0)})
	second := container("c1", 50000, 100000, 64*mi, "")
	second.Id = "c1-again"
	create(t, f, pod, second, plan.Decision{CPUs: cpuset.New(0)})
	want := limits{"0", "75000", "234881024"}
	if got := f.limits(); got != want {
		t.Errorf("after two instances of c1: %+v, want one counted: %+v", got, want)
	}
	f.x.RemoveContainer(ctx, pod, first)
	if got := f.limits(); got != want {
		t.Errorf("after the first instance's removal: %+v, want %+v", got, want)
	}
	f.x.RemoveContainer(ctx, pod, second)
	if got, want := f.limits(), (limits{"0", "25000", "167772160"}); got != want {
		t.Errorf("after the second's: %+v, want the overhead alone %+v", got, want)
	}
}
