package enforce

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/isolation"
	"github.com/podfence/podfence/podapi"
)

// slot is one container of a crash trace: it runs on CPU slot+1.
type slot struct {
	state int // 0 none, 1 created (the agent saw CreateContainer), 2 running
	gen   int
	ann   map[string]string
}

const (
	none = iota
	created
	running
)

// TestCrashProperty: random traces of container creates, starts and ends, with the agent
// killed at any point (its record written or not) and containers created, started or ended
// while it is down. After every step the node holds exactly what the running containers need:
// each IRQ's affinity is its own less their CPUs, the workqueue mask its own less the isolated
// ones, cpuset.cpus.exclusive down each isolated container's lineage and nowhere else, and an
// isolated partition for each. PODFENCE_ISOLATION_TRACES runs more traces.
func TestCrashProperty(t *testing.T) {
	traces := 24
	if v, err := strconv.Atoi(os.Getenv("PODFENCE_ISOLATION_TRACES")); err == nil && v > 0 {
		traces = v
	}
	for seed := range traces {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashTrace(t, uint64(seed), 40) })
	}
}

func crashTrace(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	f := newFixture(t, poolsPlain)
	// The node's own affinity: some IRQs pinned by the operator before podfence came.
	for irq, c := range map[int]string{36: "2-3", 38: "3", 40: "1", 41: "0"} {
		write(t, filepath.Join(f.irqRoot, fmt.Sprint(irq), "smp_affinity_list"), c+"\n")
	}
	f.open(nil) // the record takes the node as it is
	own := affinities(t, f.irqRoot)
	slots := make([]slot, 3)
	wants := []map[string]string{nil, noIRQs, {podapi.AnnotationCPULoadBalancing: "disable"},
		{podapi.CRIOIRQLoadBalancing: "disable", podapi.CRIOCPULoadBalancing: "disable"}}
	ctrOf := func(i int) (*api.PodSandbox, *api.Container) {
		s := slots[i]
		p := pod(fmt.Sprint(i), s.ann)
		c := ctr(fmt.Sprintf("c%d-%d", i, s.gen), p, fmt.Sprintf("/kubepods/pod%d/c%d-%d", i, i, s.gen),
			plan.EnvExclusiveCPUs+"="+fmt.Sprint(i+1))
		return p, c
	}
	ended := func(i int) { // the runtime removes the container's cgroup
		_, c := ctrOf(i)
		dir := filepath.Join(f.layout.Root, c.Linux.CgroupsPath)
		delete(f.cgroups.excl, dir)
		delete(f.cgroups.part, dir)
		slots[i].state = none
	}
	var trace []string
	for step := range steps {
		i := rng.IntN(len(slots))
		switch op := rng.IntN(10); {
		case op < 3 && slots[i].state == none:
			slots[i].gen++
			slots[i].ann = wants[rng.IntN(len(wants))]
			p, c := ctrOf(i)
			if _, err := f.m.CreateContainer(context.Background(), p, c, exclusive("exclusive_a", fmt.Sprint(i+1))); err != nil {
				t.Fatal(err)
			}
			slots[i].state = created
			trace = append(trace, fmt.Sprintf("create %s", c.Id))
		case op < 6 && slots[i].state == created:
			p, c := ctrOf(i)
			if err := f.m.StartContainer(context.Background(), p, c); err != nil {
				t.Fatalf("trace %v: start %s: %v", trace, c.Id, err)
			}
			slots[i].state = running
			trace = append(trace, "start "+c.Id)
		case op < 8 && slots[i].state != none:
			p, c := ctrOf(i)
			f.m.RemoveContainer(context.Background(), p, c)
			ended(i)
			trace = append(trace, "end "+c.Id)
		case op >= 8:
			flushed := rng.IntN(2) == 0
			if flushed {
				f.m.Flush()
			}
			// While the agent is down the runtime goes on without it.
			for j := range slots {
				switch slots[j].state {
				case created:
					if rng.IntN(2) == 0 {
						slots[j].state = running // started without the agent
					} else {
						ended(j)
					}
				case running:
					if rng.IntN(3) == 0 {
						ended(j)
					}
				}
			}
			f.open(nil)
			var pods []*api.PodSandbox
			var ctrs []*api.Container
			for j := range slots {
				if slots[j].state == running {
					p, c := ctrOf(j)
					pods, ctrs = append(pods, p), append(ctrs, c)
				}
			}
			if err := f.m.Synchronize(context.Background(), pods, ctrs); err != nil {
				t.Fatalf("trace %v: Synchronize: %v", trace, err)
			}
			trace = append(trace, fmt.Sprintf("kill (record flushed %v), restart", flushed))
		default:
			continue
		}
		checkNode(t, f, own, slots, ctrOf, fmt.Sprintf("seed %d step %d, trace %v", seed, step, trace))
		if t.Failed() {
			return
		}
	}
}

// checkNode wants the node to hold exactly what the running containers the agent knows need.
func checkNode(t *testing.T, f *fixture, own map[int]string, slots []slot, ctrOf func(int) (*api.PodSandbox, *api.Container), where string) {
	t.Helper()
	var held []isolation.Held
	f.m.mu.Lock()
	for _, e := range f.m.running {
		held = append(held, e.held)
	}
	f.m.mu.Unlock()
	for j := range slots {
		if slots[j].state != running {
			continue
		}
		_, c := ctrOf(j)
		if _, known := f.m.running[c.Id]; !known {
			if w, _ := podapi.ParseIsolation(slots[j].ann); w.Any() {
				t.Errorf("%s: running container %s wants isolation, the agent does not know it", where, c.Id)
			}
		}
	}
	base := isolation.IRQBaseline{IRQs: map[int]cpuset.CPUSet{}, Default: set("0-3")}
	for n, c := range own {
		base.IRQs[n] = set(c)
	}
	want := isolation.PlanIRQs(base, set("0-3"), isolation.NoIRQCPUs(held))
	got := affinities(t, f.irqRoot)
	for n, w := range want.IRQs {
		if got[n] != w.String() {
			t.Errorf("%s: IRQ %d affinity %s, want %s", where, n, got[n], w)
		}
	}
	if wq := read(t, f.wqFile); wq != isolation.FormatMask(set("0-3").Difference(isolation.IsolatedCPUs(held))) {
		t.Errorf("%s: workqueue cpumask %s, want all but %s", where, wq, isolation.IsolatedCPUs(held))
	}
	wantExcl := map[string]string{}
	for d, c := range isolation.Exclusive(held) {
		wantExcl[d] = c.String()
	}
	gotExcl := map[string]string{}
	for d, c := range f.cgroups.excl {
		if !c.IsEmpty() {
			gotExcl[d[len(f.layout.Root):]] = c.String()
		}
	}
	if !maps.Equal(gotExcl, wantExcl) {
		t.Errorf("%s: cpuset.cpus.exclusive %v, want %v", where, gotExcl, wantExcl)
	}
	for _, h := range held {
		if st, _ := f.m.parts.State(h.Cgroup); h.Want.NoLoadBalance && st != Isolated {
			t.Errorf("%s: container %s partition %q, want isolated", where, h.ID, st)
		}
	}
}
