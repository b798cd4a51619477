package nriplugin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/podapi"
)

// TestSidecarKeepsItsCPUs: a native sidecar (named in podfence.io/sidecars, as the webhook
// writes it) holds its CPUs for the pod's whole life. When it exits (StopContainer), no
// container that follows gets them, of its pod (a plain init container, the app) or another,
// and its restart (a new instance) runs on them again. A plain init container's CPUs go to
// the containers that follow it, as the kubelet's managers reuse them. The pod's removal frees
// the sidecar's.
func TestSidecarKeepsItsCPUs(t *testing.T) {
	rt, ar := setup(t, nriplugin.Options{})
	ann := poolReq(`{"proxy": {"exclusive_b": 2}, "setup": {"exclusive_b": 2}, "app": {"exclusive_b": 2}}`)
	ann[podapi.AnnotationSidecars] = "proxy"
	pod := rt.runPod("p", ann)
	proxy := rt.mustCreate(pod, "proxy", nil)
	check(t, proxy, want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	rt.stopCtr(proxy.ctr) // it crashed
	setup := rt.mustCreate(pod, "setup", nil)
	check(t, setup, want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	rt.stopCtr(setup.ctr) // done
	check(t, rt.mustCreate(pod, "app", nil), want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	other := rt.runPod("q", poolReq(`{"app": {"exclusive_b": 2}}`))
	check(t, rt.mustCreate(other, "app", nil), want{cpus: "6,14", mems: "1", exclusive: "6,14"})
	check(t, rt.mustCreate(pod, "proxy", nil), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	checkHeld(t, "with the sidecar back", ar.Allocations(), "p:app:5,13", "p:proxy:4,12", "q:app:6,14")
	rt.removePod(pod)
	checkHeld(t, "after the pod", ar.Allocations(), "q:app:6,14")
}

// TestSidecarKeptAcrossAgentRestart: the agent restarts while a sidecar is down (stopped,
// not removed): the new agent rebuilds its CPUs as held from the runtime's stopped instance,
// gives them to no other container, and the sidecar's restart runs on them. A restart whose
// device plugin answers with other CPUs runs where it is told, and the kept ones are free.
func TestSidecarKeptAcrossAgentRestart(t *testing.T) {
	rt := newRuntime(t)
	node := newNode(t, testTopology, testPools)
	dir := t.TempDir()
	first := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	ann := poolReq(`{"proxy": {"exclusive_b": 2}}`)
	ann[podapi.AnnotationSidecars] = "proxy"
	pod := rt.runPod("p", ann)
	proxy := rt.mustCreate(pod, "proxy", nil)
	rt.stopCtr(proxy.ctr)
	first.stop()

	second := startAgent(t, rt, node, openStore(t, dir), nriplugin.Options{})
	checkHeld(t, "after the agent's restart", second.Allocations(), "p:proxy:4,12")
	check(t, rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil),
		want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	again := rt.mustCreate(pod, "proxy", nil)
	check(t, again, want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	rt.stopCtr(again.ctr)
	check(t, rt.mustCreate(pod, "proxy", exclusiveCPUs("7,15")), want{cpus: "7,15", mems: "1", exclusive: "7,15"})
	checkHeld(t, "after a restart on other CPUs", second.Allocations(), "p:proxy:7,15", "q:app:5,13")
}

// refuseOnce refuses the next creation of a container named name (an extension failing it).
type refuseOnce struct{ name string }

func (r *refuseOnce) Name() string { return "refuse-once" }
func (r *refuseOnce) CreateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container, _ plan.Decision) (
	*api.ContainerAdjustment, error) {
	if ctr.GetName() != r.name {
		return nil, nil
	}
	r.name = ""
	return nil, errors.New("not now")
}

// TestSidecarRestartRefusedKeepsItsCPUs: a sidecar's next instance that an extension refuses
// leaves its CPUs kept (no other container gets them), and the instance after runs on them.
func TestSidecarRestartRefusedKeepsItsCPUs(t *testing.T) {
	refuse := &refuseOnce{}
	rt, ar := setup(t, nriplugin.Options{Extensions: []nriplugin.Extension{refuse}})
	ann := poolReq(`{"proxy": {"exclusive_b": 2}}`)
	ann[podapi.AnnotationSidecars] = "proxy"
	pod := rt.runPod("p", ann)
	rt.stopCtr(rt.mustCreate(pod, "proxy", nil).ctr)
	refuse.name = "proxy"
	if _, err := rt.create(pod, "proxy", nil); err == nil {
		t.Fatal("the extension's refusal did not refuse the container")
	}
	checkHeld(t, "after the refused restart", ar.Allocations(), "p:proxy:4,12")
	check(t, rt.mustCreate(rt.runPod("q", poolReq(`{"app": {"exclusive_b": 2}}`)), "app", nil),
		want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	check(t, rt.mustCreate(pod, "proxy", nil), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
}

// TestSidecarRestartKeepsCPUsTheAllocatorWouldNotPick: a sidecar placed on CPUs 5,13 (4,12
// were taken then) runs on 5,13 again after a restart, though 4,12 are free by now and the
// allocator would pick them for a new container.
func TestSidecarRestartKeepsCPUsTheAllocatorWouldNotPick(t *testing.T) {
	rt, _ := setup(t, nriplugin.Options{})
	first := rt.runPod("first", poolReq(`{"app": {"exclusive_b": 2}}`))
	check(t, rt.mustCreate(first, "app", nil), want{cpus: "4,12", mems: "1", exclusive: "4,12"})
	ann := poolReq(`{"proxy": {"exclusive_b": 2}}`)
	ann[podapi.AnnotationSidecars] = "proxy"
	pod := rt.runPod("p", ann)
	proxy := rt.mustCreate(pod, "proxy", nil)
	check(t, proxy, want{cpus: "5,13", mems: "1", exclusive: "5,13"})
	rt.removePod(first)
	rt.stopCtr(proxy.ctr)
	check(t, rt.mustCreate(pod, "proxy", nil), want{cpus: "5,13", mems: "1", exclusive: "5,13"})
}
