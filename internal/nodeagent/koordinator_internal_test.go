package nodeagent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podfence/podfence/internal/coresched"
	csenforce "github.com/podfence/podfence/internal/coresched/enforce"
	"github.com/podfence/podfence/internal/coresched/kernel"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/nodeagent/checkpoint"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/observe/events"
)

// noSchedCore is a kernel without core scheduling: the manager makes no cookies, and still
// reads the pods' labels.
type noSchedCore struct{}

func (noSchedCore) Create(int, kernel.Scope) error     { return kernel.ErrNoSchedCore }
func (noSchedCore) Share(int, int, kernel.Scope) error { return kernel.ErrNoSchedCore }
func (noSchedCore) Get(int) (kernel.Cookie, error)     { return 0, kernel.ErrNoSchedCore }
func (noSchedCore) Probe() kernel.Support              { return kernel.Support{Err: kernel.ErrNoSchedCore} }

// TestUnknownPolicyEvent: a pod whose Koordinator policy label podfence reads as the default
// is created (never refused for it), and the agent posts one Warning Event on the pod, with
// its UID and no container, however often the reporter looks.
func TestUnknownPolicyEvent(t *testing.T) {
	topo, err := topology.Synthetic("sockets=1,cores=2,threads=2")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse("p.yaml", []byte(`pools: {default: {cpus: "0-3"}}`))
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
	cg := t.TempDir()
	if err := os.WriteFile(filepath.Join(cg, "cgroup.controllers"), []byte("cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cs, err := csenforce.New(csenforce.Config{CgroupRoot: cg, ProcRoot: t.TempDir(), Policy: coresched.Strict},
		noSchedCore{}, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	a := nriplugin.New(plan.NewNode(topo, layout, plan.Policy{}), store, log, nriplugin.Options{Extensions: []nriplugin.Extension{cs}})
	defer a.Close()
	ctx := context.Background()
	pod := &api.PodSandbox{Id: "s1", Uid: "uid-1", Name: "web", Namespace: "shop",
		Labels: map[string]string{coresched.KoordLabelPolicy: "Exclusive"}}
	if err := a.RunPodSandbox(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.CreateContainer(ctx, pod, &api.Container{Id: "c1", PodSandboxId: "s1", Name: "app"}); err != nil {
		t.Fatalf("the pod was refused: %v", err)
	}
	rec := &fakeRecorder{}
	o := &reporter{rec: rec, seen: map[string]bool{}}
	for range 3 {
		o.degraded(a)
	}
	if len(rec.got) != 1 {
		t.Fatalf("events %+v, want one", rec.got)
	}
	e := rec.got[0]
	want := `label koordinator.sh/core-sched-policy="Exclusive" is not a core-scheduling policy (want "exclusive", "none" or ` +
		`empty): read as empty, as Koordinator does, so the pod is in core-scheduling group ns:shop`
	if e.Reason != csenforce.ReasonUnknownPolicy || e.Type != events.Warning || e.PodUID != "uid-1" || e.Namespace != "shop" ||
		e.Pod != "web" || e.Container != "" || e.Message != want {
		t.Errorf("event %+v\nwant message %s", e, want)
	}
}
