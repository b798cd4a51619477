package nodeagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/events"
	"github.com/podfence/podfence/podapi"
)

type fakeRecorder struct{ got []events.Event }

func (f *fakeRecorder) Record(e events.Event) { f.got = append(f.got, e) }
func (f *fakeRecorder) Run(context.Context)   {}

type degrader struct{ list []nriplugin.Degraded }

func (*degrader) Name() string                     { return "degrader" }
func (d *degrader) Degraded() []nriplugin.Degraded { return d.list }

// TestDegradedEvents: each degraded container is reported once, with its pod's UID, and
// again if it recovers and degrades anew.
func TestDegradedEvents(t *testing.T) {
	topo, err := topology.Synthetic("sockets=1,cores=4,threads=2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("p.yaml", []byte(`pools: {default: {cpus: "0-7"}}`))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deg := &degrader{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := nriplugin.New(plan.NewNode(topo, layout, plan.Policy{}), store, log, nriplugin.Options{Extensions: []nriplugin.Extension{deg}})
	defer a.Close()
	pod := &api.PodSandbox{Id: "s1", Uid: "uid-1", Name: "web", Namespace: "shop"}
	if _, _, err := a.CreateContainer(context.Background(), pod, &api.Container{Id: "c1", PodSandboxId: "s1", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	rec := &fakeRecorder{}
	o := &reporter{rec: rec, seen: map[string]bool{}}
	d := nriplugin.Degraded{Namespace: "shop", Pod: "web", Container: "app", Reason: "EPCLimitNotEnforced", Message: "m"}
	var reasons []string
	for _, list := range [][]nriplugin.Degraded{{d}, {d}, nil, {d}} {
		deg.list = list
		o.degraded(a)
		reasons = append(reasons, "|")
		for _, e := range rec.got {
			if e.PodUID != "uid-1" || e.Container != "app" || e.Type != events.Warning || e.Message != "m" {
				t.Errorf("event %+v", e)
			}
			reasons = append(reasons, e.Reason)
		}
		rec.got = nil
	}
	if want := []string{"|", "EPCLimitNotEnforced", "|", "|", "|", "EPCLimitNotEnforced"}; !slices.Equal(reasons, want) {
		t.Errorf("events %q, want %q", reasons, want)
	}
}

func TestRefusalReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{err: &plan.Refusal{Code: plan.CodeUnknownPool}, want: "UnknownPool"},
		{err: &podapi.AnnotationError{Key: "k"}, want: "InvalidAnnotation"},
		{err: fmt.Errorf("epc: %w: no misc", epc.ErrUnsupported), want: "EPCUnsupported"},
		{err: fmt.Errorf("coresched: group g: %w", kernel.ErrNoSMT), want: "CoreSchedulingUnavailable"},
		{err: io.EOF, want: "Refused"},
	} {
		if got := refusalReason(tc.err); got != tc.want {
			t.Errorf("refusalReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
