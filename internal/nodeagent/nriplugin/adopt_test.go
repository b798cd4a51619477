package nriplugin_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/testwait"
)

// node is what a runtime reports at Synchronize: its pods and containers.
type node struct {
	pods []*api.PodSandbox
	ctrs []*api.Container
}

// pod adds a running pod sandbox with annotations.
func (n *node) pod(name string, annotations map[string]string) *api.PodSandbox {
	p := &api.PodSandbox{Id: "sb-" + name, Uid: "uid-" + name, Namespace: "ns", Name: name, Annotations: annotations}
	n.pods = append(n.pods, p)
	return p
}

// run adds a running container of pod on cpus, with a CFS quota and period where not 0.
func (n *node) run(pod *api.PodSandbox, name, cpus string, quota int64, period uint64) *api.Container {
	cpu := &api.LinuxCPU{Cpus: cpus}
	if quota != 0 {
		cpu.Quota = api.Int64(quota)
	}
	if period != 0 {
		cpu.Period = api.UInt64(period)
	}
	c := &api.Container{Id: pod.Id + "-" + name, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_RUNNING,
		Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: cpu}}}
	n.ctrs = append(n.ctrs, c)
	return c
}

// synced is a new agent on node pn and checkpoint cp, synchronized with rn.
func synced(t *testing.T, pn *plan.Node, cp nriplugin.Checkpoint, rn *node) *nriplugin.Plugin {
	t.Helper()
	a := nriplugin.New(pn, cp, testLogger(t), nriplugin.Options{})
	t.Cleanup(func() { _ = a.Close() })
	ctx, cancel := context.WithDeadline(context.Background(), testwait.Deadline(t))
	defer cancel()
	if upd, err := a.Synchronize(ctx, rn.pods, rn.ctrs); err != nil || len(upd) > 0 {
		t.Fatalf("Synchronize: %v, updates %v", err, upd)
	}
	return a
}

// createOn creates container name of pod through a's handler and returns its cpuset, or the
// refusal.
func createOn(t *testing.T, a *nriplugin.Plugin, pod *api.PodSandbox, id, name string, annotations map[string]string) (string, error) {
	t.Helper()
	adj, _, err := a.CreateContainer(t.Context(), pod, &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, Annotations: annotations})
	return adj.GetLinux().GetResources().GetCpu().GetCpus(), err
}

func checkFull(t *testing.T, what string, a *nriplugin.Plugin, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := full(a.Allocations()); !slices.Equal(got, want) {
		t.Errorf("%s:\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestAdoptFromCPUSetAndQuota: on the test node (2×4×2, shared_s = 1,9) with no checkpoint,
// containers podfence did not place are adopted as they run: exclusive CPUs plus the shared
// pool hold the CPUs and the share their CFS quota pays for beyond them; a cpuset on the
// shared pool without a usable CFS limit, or with no share beyond its exclusive CPUs, is no
// podfence share and stays unmanaged; the rebuild goes on past them.
func TestAdoptFromCPUSetAndQuota(t *testing.T) {
	var rn node
	foreign := rn.pod("foreign", nil)
	mixed := rn.run(foreign, "mixed", "1,4,9", 130000, 100000) // CPU 4 and 300 millicpu
	rn.run(foreign, "share", "1,9", 25000, 100000)             // 250 millicpu
	rn.run(foreign, "noperiod", "1,9", 30000, 0)               // quota without period
	rn.run(foreign, "nolimit", "1,9", -1, 100000)              // no bandwidth limit
	rn.run(foreign, "noshare", "1,5,9", 100000, 100000)        // CPU 5 and nothing beyond it
	a := synced(t, newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, &rn)
	checkFull(t, "adopted", a,
		"uid-foreign/ns/foreign/mixed pool=exclusive_b type=exclusive cpus=4 idled= shared=shared_s/300",
		"uid-foreign/ns/foreign/share pool=shared_s type=shared cpus= idled= shared=shared_s/250")

	// 2000 - 300 - 250 millicpu of shared_s are free, and CPU 4 is held.
	pod := rn.pod("new", poolReq(`{"big": {"shared_s": 1451}, "fits": {"shared_s": 1450}}`))
	if _, err := createOn(t, a, pod, "c1", "big", nil); err == nil {
		t.Error("1451 millicpu granted; 1450 are free")
	}
	if _, err := createOn(t, a, pod, "c2", "fits", nil); err != nil {
		t.Errorf("1450 millicpu refused: %v", err)
	}
	if _, err := createOn(t, a, rn.pod("four", nil), "c3", "app", exclusiveCPUs("4")); err == nil {
		t.Error("CPU 4, which the adopted container runs on, handed out")
	}
	if cpus, err := createOn(t, a, rn.pod("five", nil), "c4", "app", exclusiveCPUs("5")); err != nil || cpus != "5" {
		t.Errorf("CPU 5, whose container is unmanaged: %q, %v; want it handed out", cpus, err)
	}

	// The adopted container ends: its CPU and its share are free again.
	if _, err := a.StopContainer(t.Context(), foreign, mixed); err != nil {
		t.Fatal(err)
	}
	if cpus, err := createOn(t, a, rn.pod("four-again", nil), "c5", "app", exclusiveCPUs("4")); err != nil || cpus != "4" {
		t.Errorf("CPU 4 after its adopted container ended: %q, %v; want it handed out", cpus, err)
	}
	if _, err := createOn(t, a, rn.pod("more", poolReq(`{"app": {"shared_s": 300}}`)), "c6", "app", nil); err != nil {
		t.Errorf("the adopted container's 300 millicpu after it ended: %v", err)
	}
}

// TestRebuildOverALaggingRecord: a container whose annotation and cpuset show a share of the
// whole shared pool (2000 millicpu of shared_s) is rebuilt as the runtime shows it, over a
// checkpoint record of an older share, and the record is rewritten.
func TestRebuildOverALaggingRecord(t *testing.T) {
	var rn node
	p := rn.pod("p", poolReq(`{"app": {"shared_s": 2000}}`))
	rn.run(p, "app", "1,9", 200000, 100000)
	store := newMemStore([]allocation.Allocation{{PodUID: "uid-p", Namespace: "ns", Pod: "p", Container: "app",
		Pool: "shared_s", Type: allocation.TypeShared, SharedPool: "shared_s", MilliCPU: 1500}})
	a := synced(t, newNode(t, testTopology, testPools), store, &rn)
	want := "uid-p/ns/p/app pool=shared_s type=shared cpus= idled= shared=shared_s/2000"
	checkFull(t, "rebuilt", a, want)
	if _, err := createOn(t, a, rn.pod("q", poolReq(`{"app": {"shared_s": 1}}`)), "c1", "app", nil); err == nil {
		t.Error("1 millicpu of shared_s granted; the running container has all 2000")
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, _ := store.Load()
	if got := full(recs); !slices.Equal(got, []string{want}) {
		t.Errorf("checkpoint %v, want the share the runtime shows", got)
	}
}
