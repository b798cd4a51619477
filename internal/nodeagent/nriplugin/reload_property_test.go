package nriplugin_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// configVariants are valid pool configs of the test node, each moving CPUs between pools.
func configVariants(t *testing.T) []*plan.Node {
	r := strings.NewReplacer
	variants := []string{
		testPoolsST,
		r(`exclusive_b: {cpus: "4-7,12-15"`, `exclusive_c: {cpus: "7,15", hyperThreadingPolicy: multiThreaded}
  exclusive_b: {cpus: "4-6,12-14"`).Replace(testPoolsST),
		r(`shared_s:    {cpus: "1,9"}`, `shared_s:    {cpus: "1"}`).Replace(testPoolsST), // 9 joins the default pool
		r(`hyperThreadingPolicy: singleThreaded`, `hyperThreadingPolicy: multiThreaded`).Replace(testPoolsST),
		r(`shared_s:    {cpus: "1,9"}`, `shared_s:    {cpus: "1,3,9,11"}`, `exclusive_a: {cpus: "2-3,10-11"`,
			`exclusive_a: {cpus: "2,10"`).Replace(testPoolsST),
		r(`default:     {cpus: "0,8"}`, `default:     {cpus: "0,8,15"}`, `exclusive_b: {cpus: "4-7,12-15"`,
			`exclusive_b: {cpus: "4-7,12-14"`).Replace(testPoolsST),
	}
	var out []*plan.Node
	for _, v := range variants {
		out = append(out, newNode(t, testTopology, v))
	}
	return out
}

// TestConfigChangeProperty runs random lifecycles in which random valid pool configs are
// applied at random points (and the agent killed and restarted, as the DaemonSet would, on
// the config file's newest layout with the layout last in force recorded): no CPU is ever
// held by a running exclusive container while another running container runs on it, and a
// rebuilt state equals the state before.
func TestConfigChangeProperty(t *testing.T) {
	traces, steps := 1000, 60
	if testing.Short() {
		traces = 200
	}
	variants := configVariants(t)
	taken, pendingAtKill, kills := 0, 0, 0
	for seed := range traces {
		tr := &trace{t: t, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 19)), node: variants[0], disk: newMemStore(nil),
			pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{}, wants: map[string][]string{}}
		file := variants[0] // what the pool config file says
		opts := func(next *plan.Node) nriplugin.Options {
			return nriplugin.Options{Next: next, LayoutChanged: func(n *plan.Node) { tr.node = n; taken++ }}
		}
		tr.agent = nriplugin.New(tr.node, tr.disk, discard, opts(nil))
		tr.restart = func(store *memStore) {
			if _, ok := tr.agent.PendingReload(); ok {
				pendingAtKill++
			}
			var next *plan.Node
			if file != tr.node {
				next = file
			}
			tr.agent = nriplugin.New(tr.node, store, tr.log(), opts(next))
		}
		if _, err := tr.agent.Synchronize(context.Background(), nil, nil); err != nil {
			t.Fatal(err)
		}
		for range steps {
			if tr.rng.IntN(8) == 0 {
				file = variants[tr.rng.IntN(len(variants))]
				err := tr.agent.Reload(file)
				if err != nil && !strings.Contains(err.Error(), nriplugin.ErrPending.Error()) {
					t.Fatalf("seed %d: Reload: %v", seed, err)
				}
			} else {
				tr.step()
			}
			tr.checkNoCPUTwice()
			tr.checkRunsAsDecided()
			if err := tr.agent.Flush(); err != nil {
				t.Fatal(err)
			}
			recs, _ := tr.disk.Load()
			tr.history = append(tr.history, recs)
		}
		_ = tr.agent.Close()
		kills += tr.kills
	}
	t.Logf("%d traces of %d steps: %d configs taken, %d kills (%d while a config was pending), no CPU held twice",
		traces, steps, taken, kills, pendingAtKill)
}

// checkRunsAsDecided fails when a container the agent holds runs elsewhere than the agent's
// layout in force decides for it.
func (tr *trace) checkRunsAsDecided() {
	node, allocs := tr.agent.Snapshot()
	for _, a := range allocs {
		for _, c := range tr.ctrs {
			pod := tr.pods[c.PodSandboxId]
			if c.State == api.ContainerState_CONTAINER_STOPPED || pod.Uid != a.PodUID || c.Name != a.Container {
				continue
			}
			if want := node.Decide(a).CPUs.String(); c.Linux.Resources.Cpu.Cpus != want {
				tr.fatalf("%s runs on %s, but the layout in force (%s) decides %s", a.Key(), c.Linux.Resources.Cpu.Cpus,
					slices.Collect(func(yield func(string) bool) {
						for _, p := range node.Pools.Pools {
							if !yield(p.Name + "=" + p.CPUs.String()) {
								return
							}
						}
					}), want)
			}
		}
	}
}
