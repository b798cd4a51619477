package nriplugin_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

// recorder implements every extension hook and records the calls it gets.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }
func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (*recorder) Name() string { return "recorder" }
func (r *recorder) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) error {
	r.add("sync")
	return nil
}
func (r *recorder) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	r.add("run:" + pod.Name)
	return nil
}
func (r *recorder) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container,
	d plan.Decision) (*api.ContainerAdjustment, error) {
	r.add("create:" + ctr.Name + ":" + d.CPUs.String())
	if ctr.Name == "refuse" {
		return nil, errors.New("no room for this one")
	}
	frag := &api.ContainerAdjustment{}
	frag.AddLinuxUnified("misc.max", "sgx_epc 4096")
	return frag, nil
}
func (r *recorder) StartContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	r.add("start:" + ctr.Name)
	return errors.New("start errors are only logged")
}
func (r *recorder) UpdateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) error {
	r.add("update:" + ctr.Name + ":" + res.GetCpu().GetCpus())
	return nil
}
func (r *recorder) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) {
	r.add("remove:" + ctr.Name)
}
func (r *recorder) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) {
	r.add("removepod:" + pod.Name)
}

var (
	_ nriplugin.ContainerCreator = (*recorder)(nil)
	_ nriplugin.ContainerStarter = (*recorder)(nil)
	_ nriplugin.ContainerRemover = (*recorder)(nil)
	_ nriplugin.ContainerUpdater = (*recorder)(nil)
	_ nriplugin.PodRunner        = (*recorder)(nil)
	_ nriplugin.PodRemover       = (*recorder)(nil)
	_ nriplugin.Synchronizer     = (*recorder)(nil)
)

// TestExtensionHooks: every hook is called on its event, after the CPU decision; a create
// hook's unified resources reach the adjustment, and its error refuses that container only.
func TestExtensionHooks(t *testing.T) {
	rec := &recorder{}
	rt, _ := setup(t, nriplugin.Options{Extensions: []nriplugin.Extension{rec}})
	pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 2}}`))
	c := rt.mustCreate(pod, "app", nil)
	if got := c.adjust.GetLinux().GetResources().GetUnified()["misc.max"]; got != "sgx_epc 4096" {
		t.Errorf("unified misc.max = %q, want the extension's", got)
	}
	if _, err := rt.create(pod, "refuse", nil); err == nil || !strings.Contains(err.Error(), "recorder: no room for this one") {
		t.Errorf("create refuse: err %v, want the extension's error", err)
	}
	rt.startCtr(c.ctr)
	rt.updateResources(c.ctr, &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: "0-15"}})
	rt.removeCtr(c.ctr)
	rt.removePod(pod)
	want := []string{"sync", "run:p", "create:app:2,10", "create:refuse:0,8", "start:app", "update:app:0-15", "remove:app",
		"remove:app", "removepod:p"}
	if got := rec.got(); !slices.Equal(got, want) {
		t.Errorf("hooks called %q,\nwant %q", got, want)
	}
}

// fragment is a create hook that adds a fixed fragment, and a pod hook that fails pods
// named "refused" and panics on pods named "boom".
type fragment struct {
	name string
	frag func() *api.ContainerAdjustment
}

func (f fragment) Name() string { return f.name }
func (f fragment) CreateContainer(context.Context, *api.PodSandbox, *api.Container, plan.Decision) (*api.ContainerAdjustment, error) {
	return f.frag(), nil
}
func (f fragment) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	switch pod.Name {
	case "refused":
		return errors.New("no sandbox for this pod")
	case "boom":
		panic("gate bug")
	}
	return nil
}

// TestExtensionFragmentsMerge: the fragments of several create hooks add up in the
// container's adjustment: one's command line stays when a later one sets none, and each
// one's annotations, environment and unified resources reach the container beside the CPU
// settings.
func TestExtensionFragmentsMerge(t *testing.T) {
	starter := fragment{name: "starter", frag: func() *api.ContainerAdjustment {
		f := &api.ContainerAdjustment{}
		f.SetArgs([]string{"/podfence/start", "--", "app"})
		return f
	}}
	labeler := fragment{name: "labeler", frag: func() *api.ContainerAdjustment {
		f := &api.ContainerAdjustment{}
		f.AddAnnotation("example.com/tier", "gold")
		f.AddEnv("TIER", "gold")
		f.AddLinuxUnified("misc.max", "sgx_epc 4096")
		return f
	}}
	rt, _ := setup(t, nriplugin.Options{Extensions: []nriplugin.Extension{starter, labeler}})
	c := rt.mustCreate(rt.runPod("p", poolReq(`{"app": {"exclusive_a": 1}}`)), "app", nil)
	check(t, c, want{cpus: "2", mems: "0", exclusive: "2"})
	if got := c.adjust.GetArgs(); !slices.Equal(got, []string{"/podfence/start", "--", "app"}) {
		t.Errorf("args %q, want the starter's", got)
	}
	if got := c.adjust.GetAnnotations()["example.com/tier"]; got != "gold" {
		t.Errorf("annotation example.com/tier = %q, want the labeler's", got)
	}
	if got := c.env("TIER"); got != "gold" {
		t.Errorf("TIER = %q, want the labeler's", got)
	}
	if got := c.adjust.GetLinux().GetResources().GetUnified()["misc.max"]; got != "sgx_epc 4096" {
		t.Errorf("unified misc.max = %q, want the labeler's", got)
	}
}

// TestPodRunnerRefusesSandbox: a pod hook's error, or its panic, fails the pod sandbox,
// naming the extension; other pods run.
func TestPodRunnerRefusesSandbox(t *testing.T) {
	ext := fragment{name: "gate", frag: func() *api.ContainerAdjustment { return nil }}
	a := nriplugin.New(newNode(t, testTopology, testPools), nritest.NoCheckpoint{}, testLogger(t),
		nriplugin.Options{Extensions: []nriplugin.Extension{ext}})
	defer a.Close()
	err := a.RunPodSandbox(t.Context(), &api.PodSandbox{Id: "s1", Uid: "u1", Namespace: "ns", Name: "refused"})
	if err == nil || err.Error() != "gate: no sandbox for this pod" {
		t.Errorf("RunPodSandbox of the refused pod: %v, want the extension's error", err)
	}
	err = a.RunPodSandbox(t.Context(), &api.PodSandbox{Id: "s3", Uid: "u3", Namespace: "ns", Name: "boom"})
	if err == nil || err.Error() != "extension gate RunPodSandbox: internal error: gate bug" {
		t.Errorf("RunPodSandbox with a panicking hook: %v, want the panic as the error", err)
	}
	if err := a.RunPodSandbox(t.Context(), &api.PodSandbox{Id: "s2", Uid: "u2", Namespace: "ns", Name: "fine"}); err != nil {
		t.Errorf("RunPodSandbox of another pod: %v", err)
	}
}
