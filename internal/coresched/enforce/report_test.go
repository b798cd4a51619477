package enforce

import (
	"encoding/json"
	"testing"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/observe/status"
)

func TestState(t *testing.T) {
	n := newFakeNode(t)
	m, _ := n.manager(Config{})
	pod := fakePod("p1", "shop")
	ctr := fakeCtr(pod, "web", 110)
	n.spawn(cgroupOf(ctr), 110)
	n.spawn(pod.Linux.CgroupsPath, 100)
	pod.Pid = 100
	must(t, m.RunPodSandbox(ctx, pod))
	must(t, m.StartContainer(ctx, pod, ctr))
	b, err := json.Marshal(m.State())
	must(t, err)
	var r status.Report
	r.Extensions = map[string]json.RawMessage{status.SectionCoreSched: b}
	var cs status.CoreSched
	must(t, r.Section(status.SectionCoreSched, &cs))
	if rep := m.State().(Report); !rep.Supported || rep.Reason != "" {
		t.Errorf("supported %v, reason %q: want supported", rep.Supported, rep.Reason)
	}
	want := status.CoreSchedContainer{Namespace: "shop", Pod: "p1", Container: "web", Group: "ns:shop", State: "ok"}
	if len(cs.Containers) != 1 || cs.Containers[0] != want {
		t.Errorf("section %s: want only %+v", b, want)
	}
	if len(m.Degraded()) != 0 {
		t.Errorf("degraded %+v: want none", m.Degraded())
	}
}

func TestDegraded(t *testing.T) {
	n := newFakeNode(t)
	n.support.Err = kernel.ErrNoSMT
	m, _ := n.manager(Config{Policy: coresched.BestEffort})
	asked, implicit := fakePod("p1", "shop", coresched.LabelGroup, "a"), fakePod("p2", "shop")
	must(t, m.StartContainer(ctx, asked, fakeCtr(asked, "web", 0)))
	must(t, m.StartContainer(ctx, implicit, fakeCtr(implicit, "db", 0)))
	d := m.Degraded()
	if len(d) != 1 || d[0].Pod != "p1" || d[0].Container != "web" || d[0].Reason != "CoreSchedulingNotEnforced" {
		t.Fatalf("degraded %+v: want the explicit one only", d)
	}
	t.Log(d[0].Message)
	if rep := m.State().(Report); rep.Supported || rep.Reason != "probe: no SMT: core scheduling needs sibling hyperthreads" {
		t.Errorf("supported %v, reason %q: want unsupported, with the probe's reason", rep.Supported, rep.Reason)
	}
}
