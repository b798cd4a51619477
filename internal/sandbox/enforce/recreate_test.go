package enforce_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/sandbox/host"
	"github.com/podfence/podfence/podapi"
)

// newerID is the sandbox the kubelet re-creates for the Kata pod: same UID, name and
// cgroup parent; its shim is 300 and its hypervisor 400 (threads 400-403).
const newerID = "6bc1d"

var newerPath = podDir + "/" + host.Name(newerID)

// recreated spawns the re-created sandbox's processes and returns it.
func (f *fixture) recreated() *api.PodSandbox {
	f.n.Spawn(300, 1, "containerd-shim", 3, "/")
	f.n.Spawn(400, 300, "qemu-system-x86", 4, "/")
	p := kataPod()
	p.Id, p.Pid, p.Linux.CgroupsPath = newerID, 400, podDir+"/"+newerID
	return p
}

// newerLimits reads the re-created sandbox's cgroup (cgroup v1).
func (f *fixture) newerLimits() limits {
	r := func(h, name string) string { return f.n.ReadFile(filepath.Join(h, newerPath, name)) }
	return limits{r("cpuset", "cpuset.cpus"), r("cpu,cpuacct", "cpu.cfs_quota_us"), r("memory", "memory.limit_in_bytes")}
}

// memorySeries scrapes x through a pedantic registry, which refuses two series with the
// same labels, and returns the values of podfence_vm_sandbox_memory_limit_bytes.
func memorySeries(t *testing.T, x prometheus.Collector) []float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(x)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	var out []float64
	for _, mf := range mfs {
		if mf.GetName() == "podfence_vm_sandbox_memory_limit_bytes" {
			for _, m := range mf.GetMetric() {
				out = append(out, m.GetGauge().GetValue())
			}
		}
	}
	return out
}

// TestSandboxRecreated, through the real NRI runtime side: the kubelet re-creates the dead
// Kata sandbox under the same pod UID, creates the container again in it, and only then
// removes the old sandbox. The new sandbox keeps its cgroup, limits and processes; while
// both are held, the pod's series are the new sandbox's, once.
func TestSandboxRecreated(t *testing.T) {
	f := newFixture(t, "v1")
	rt := startAgent(t, f)
	ctx := context.Background()
	cpuPools := map[string]string{podapi.AnnotationCPUPools: `{"c1": {"shared_s": 500}}`}

	old := kataPod()
	old.Annotations = cpuPools
	if err := rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Create(ctx, old, container("c1", 0, 0, 64*mi, "")); err != nil {
		t.Fatal(err)
	}
	if err := rt.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: old}); err != nil {
		t.Fatal(err)
	}
	newer := f.recreated()
	newer.Annotations = cpuPools
	if err := rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: newer}); err != nil {
		t.Fatal(err)
	}
	again := container("c1-again", 0, 0, 64*mi, "")
	again.Name, again.PodSandboxId = "c1", newerID
	if _, err := rt.Create(ctx, newer, again); err != nil {
		t.Fatal(err)
	}
	want := limits{"1", "75000", "234881024"} // the overhead and c1's 500m share of shared_s
	if got := f.newerLimits(); got != want {
		t.Errorf("new sandbox %+v, want %+v", got, want)
	}
	if got := memorySeries(t, f.x.Collector()); len(got) != 1 || got[0] != 234881024 {
		t.Errorf("memory limit series with both sandboxes held: %v, want the new sandbox's only", got)
	}

	if err := rt.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: old}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.n.Root, "cpuset", sbPath)); !os.IsNotExist(err) {
		t.Errorf("the old sandbox's cgroup is left: %v", err)
	}
	if got := f.newerLimits(); got != want {
		t.Errorf("new sandbox after the old one's removal %+v, want %+v", got, want)
	}
	for _, tid := range []int{300, 400, 403} {
		if got := f.n.In(tid, "cpuset"); got != newerPath {
			t.Errorf("thread %d in %s, want the new sandbox's cgroup", tid, got)
		}
	}
}

// TestSynchronizeRecreatedSandbox: an agent restarted while both sandboxes are listed (the
// old one dead: its pid gone, its container exited) holds the new sandbox as before the
// restart, shows its series once, and keeps it when the old sandbox is removed.
func TestSynchronizeRecreatedSandbox(t *testing.T) {
	f := newFixture(t, "v1")
	ctx, old := context.Background(), kataPod()
	newer := f.recreated()
	running := container("c1-again", 25000, 100000, 64*mi, "1")
	running.PodSandboxId = newerID
	if err := f.x.RunPodSandbox(ctx, newer); err != nil {
		t.Fatal(err)
	}
	create(t, f, newer, running, plan.Decision{})
	before := f.newerLimits()

	restarted := f.newExtension(t)
	old.Pid = 999 // exited
	exited := container("c1", 25000, 100000, 64*mi, "1")
	exited.State = api.ContainerState_CONTAINER_STOPPED
	if err := restarted.Synchronize(ctx, []*api.PodSandbox{newer, old}, []*api.Container{running, exited}); err != nil {
		t.Fatal(err)
	}
	if got := f.newerLimits(); got != before {
		t.Errorf("after the restart %+v, before %+v", got, before)
	}
	if got := memorySeries(t, restarted.Collector()); len(got) != 1 || got[0] != 234881024 {
		t.Errorf("memory limit series after the restart: %v, want the new sandbox's only", got)
	}
	restarted.RemovePodSandbox(ctx, old)
	if got := f.newerLimits(); got != before {
		t.Errorf("after the old sandbox's removal %+v, before %+v", got, before)
	}
	if got := memorySeries(t, restarted.Collector()); len(got) != 1 || got[0] != 234881024 {
		t.Errorf("memory limit series after the old sandbox's removal: %v", got)
	}
}
