package enforce

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/podapi"
)

// TestThroughNRI: the agent with the isolation manager behind the real NRI runtime side. A pod
// asking for two CPUs of exclusive_a with CRI-O's annotations gets them as its cpuset at
// CreateContainer; at StartContainer interrupts, the workqueue mask and an isolated partition
// leave them out; at StopContainer everything is given back.
func TestThroughNRI(t *testing.T) {
	nritest.QuietLogs()
	f := newFixture(t, poolsPlain)
	rt := nritest.StartRuntime(t, "")
	a := nriplugin.New(f.node, nritest.NoCheckpoint{}, slog.New(slog.DiscardHandler), nriplugin.Options{Extensions: []nriplugin.Extension{f.m}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, nriplugin.Connection{Socket: rt.Socket, PluginName: "podfence", PluginIndex: "10"})
	}()
	t.Cleanup(func() { cancel(); <-done; _ = a.Close() })
	rt.WaitSynced(t, 1)

	p := &api.PodSandbox{Id: "sb1", Uid: "uid1", Namespace: "ns", Name: "rt", Annotations: map[string]string{
		podapi.AnnotationCPUPools:   `{"app": {"exclusive_a": 2}}`,
		podapi.CRIOIRQLoadBalancing: "disable", podapi.CRIOCPULoadBalancing: "disable"}}
	c := &api.Container{Id: "c1", PodSandboxId: "sb1", Name: "app", State: api.ContainerState_CONTAINER_CREATED,
		Linux: &api.LinuxContainer{CgroupsPath: cg1}}
	b := rt.BlockPluginSync()
	if err := rt.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: p}); err != nil {
		t.Fatal(err)
	}
	rpl, err := rt.Create(ctx, p, c)
	b.Unblock()
	if err != nil {
		t.Fatal(err)
	}
	cpus := rpl.GetAdjust().GetLinux().GetResources().GetCpu().GetCpus()
	got, err := cpusetOf(cpus)
	if err != nil || got.Size() != 2 {
		t.Fatalf("cpuset %q (%v): want 2 CPUs of exclusive_a", cpus, err)
	}
	f.irqs("created, not started", "0-3", "f")
	c.State = api.ContainerState_CONTAINER_RUNNING
	if err := rt.StartContainer(ctx, &api.StartContainerRequest{Pod: p, Container: c}); err != nil {
		t.Fatal(err)
	}
	rest := set("0-3").Difference(got)
	f.irqs("started", rest.String(), maskOf(rest))
	if wq := read(t, f.wqFile); wq != maskOf(rest) {
		t.Errorf("workqueue cpumask %s, want %s", wq, maskOf(rest))
	}
	if st := f.cgroups.part[filepath.Join(f.layout.Root, cg1)]; st != Isolated {
		t.Errorf("partition %q, want isolated", st)
	}
	if _, err := rt.StopContainer(ctx, &api.StopContainerRequest{Pod: p, Container: c}); err != nil {
		t.Fatal(err)
	}
	f.irqs("stopped", "0-3", "0000000f")
	if wq := read(t, f.wqFile); wq != "0000000f" {
		t.Errorf("workqueue cpumask %s after the stop, want 0000000f", wq)
	}
}
