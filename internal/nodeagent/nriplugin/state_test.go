package nriplugin_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/podapi"
)

// reporter is an extension with a state, degraded containers and refusals to observe.
type reporter struct {
	name  string
	panic bool
	mu    sync.Mutex
	seen  []string
}

func (r *reporter) Name() string { return r.name }
func (r *reporter) State() any {
	if r.panic {
		panic("broken state")
	}
	return map[string]int{"n": 1}
}
func (r *reporter) Degraded() []nriplugin.Degraded {
	if r.panic {
		panic("broken list")
	}
	return []nriplugin.Degraded{{Namespace: "ns", Pod: "p", Container: "c", Reason: "Why"}}
}
func (r *reporter) Refused(pod *api.PodSandbox, ctr *api.Container, err error) {
	if r.panic {
		panic("broken observer")
	}
	code := "-"
	if ref := (*plan.Refusal)(nil); errors.As(err, &ref) {
		code = ref.Code
	}
	r.mu.Lock()
	r.seen = append(r.seen, pod.GetName()+"/"+ctr.GetName()+" refusal="+code)
	r.mu.Unlock()
}

var (
	_ nriplugin.StateReporter    = (*reporter)(nil)
	_ nriplugin.DegradedReporter = (*reporter)(nil)
	_ nriplugin.RefusalObserver  = (*reporter)(nil)
)

func TestReadyAndSnapshot(t *testing.T) {
	node := newNode(t, testTopology, testPools)
	a := nriplugin.New(node, openStore(t, t.TempDir()), testLogger(t), nriplugin.Options{})
	if a.Ready() {
		t.Error("ready before the first Synchronize")
	}
	rt := newRuntime(t)
	ar := startAgent(t, rt, node, openStore(t, t.TempDir()), nriplugin.Options{})
	if !ar.Ready() {
		t.Error("not ready after Synchronize")
	}
	pod := rt.runPod("p", poolReq(`{"app": {"exclusive_a": 2}}`))
	rt.mustCreate(pod, "app", nil)
	n, allocs := ar.Snapshot()
	if n != node || len(allocs) != 1 || allocs[0].Container != "app" || allocs[0].CPUs.Size() != 2 {
		t.Errorf("snapshot: node %p (want %p), allocations %+v", n, node, allocs)
	}
}

// TestReporters: states and degraded lists by extension, refusals observed with their
// error; a panicking extension is left out and breaks nothing.
func TestReporters(t *testing.T) {
	good, bad := &reporter{name: "good"}, &reporter{name: "bad", panic: true}
	rt, ar := setup(t, nriplugin.Options{Extensions: []nriplugin.Extension{bad, good}})
	states := ar.ExtensionStates()
	if len(states) != 1 || states["good"] == nil {
		t.Errorf("states %v, want good's only", states)
	}
	if d := ar.Degraded(); len(d) != 1 || d[0].Reason != "Why" {
		t.Errorf("degraded %+v, want good's", d)
	}
	pod := rt.runPod("p", poolReq(`{"big": {"exclusive_a": 999}}`))
	if _, err := rt.create(pod, "big", nil); err == nil {
		t.Fatal("999 CPUs given")
	}
	if _, err := rt.create(pod, "other", map[string]string{podapi.AnnotationExclusiveCPUs: "x"}); err == nil {
		t.Fatal("bad annotation accepted")
	}
	good.mu.Lock()
	defer good.mu.Unlock()
	if got := strings.Join(good.seen, "; "); got != "p/big refusal="+plan.CodeExclusiveTooLarge+"; p/other refusal=-" {
		t.Errorf("observed %q", got)
	}
}
