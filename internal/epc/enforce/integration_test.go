package enforce_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
)

func TestMain(m *testing.M) {
	nritest.QuietLogs() // the runtime side's logger is global; keep test output readable
	os.Exit(m.Run())
}

// runtime is the real NRI runtime side (adaptation) with plugins connected over a Unix
// socket: the podfence agent carrying the EPC extension, and any others.
type runtime struct {
	*nritest.Runtime
	t *testing.T
}

func newRuntime(t *testing.T) *runtime {
	return &runtime{Runtime: nritest.StartRuntime(t, ""), t: t}
}

// waitPlugins waits until n plugins have connected and been synchronized.
func (rt *runtime) waitPlugins(n int) {
	rt.t.Helper()
	rt.WaitSynced(rt.t, n)
}

// runAgent connects the podfence agent, with ext as its only extension, at index 10.
func (rt *runtime) runAgent(ext nriplugin.Extension) {
	topo, err := topology.Synthetic("sockets=1,cores=2,threads=1")
	if err != nil {
		rt.t.Fatal(err)
	}
	cfg, err := pools.Parse("test", []byte("pools:\n  default: {cpus: \"0-1\"}\n"))
	if err != nil {
		rt.t.Fatal(err)
	}
	layout, err := pools.Resolve(cfg, topo)
	if err != nil {
		rt.t.Fatal(err)
	}
	a := nriplugin.New(plan.NewNode(topo, layout, plan.Policy{}), nritest.NoCheckpoint{}, testLog(rt.t),
		nriplugin.Options{Extensions: []nriplugin.Extension{ext}})
	rt.serve(func(ctx context.Context) error {
		return a.Run(ctx, nriplugin.Connection{Socket: rt.Socket, PluginName: "podfence", PluginIndex: "10"})
	})
	rt.t.Cleanup(func() { _ = a.Close() })
}

// serve runs a plugin until the test ends.
func (rt *runtime) serve(run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	rt.t.Cleanup(func() { cancel(); <-done })
}

// create relays a CRI CreateContainer through NRI, as containerd does.
func (rt *runtime) create(p *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	b := rt.BlockPluginSync()
	defer b.Unblock()
	if err := rt.RunPodSandbox(context.Background(), &api.RunPodSandboxRequest{Pod: p}); err != nil {
		rt.t.Fatal(err)
	}
	return rt.Create(context.Background(), p, c)
}

// TestThroughNRI drives the extension through the real NRI runtime side: the adjustment
// the runtime gets on cgroup v2, the cgroup written ahead on v1, the refusals it reports.
func TestThroughNRI(t *testing.T) {
	mainline := func(root string) { writeFile(t, root+"/misc.capacity", "sev 0\n") }
	for _, tc := range []struct {
		name, layout string
		policy       epc.Policy
		edit         func(root string)
		wantUnified  string
		wantWritten  string // misc.max of the container's v1 cgroup
		wantErr      string
	}{
		{name: "v2", layout: "v2", wantUnified: "sgx_epc 1048576"},
		{name: "v1", layout: "v1", wantWritten: "sgx_epc 1048576"},
		{name: "v2 mainline strict", layout: "v2", edit: mainline,
			wantErr: `pod ns/p1 container "app": epc: SGX EPC limit 1048576 bytes (annotation epc-limit.nri.io/container.app): the ` +
				`kernel lacks SGX EPC cgroup support: <root>/misc.capacity lists no sgx_epc (it lists sev)`},
		{name: "v2 mainline best effort", layout: "v2", edit: mainline, policy: epc.BestEffort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, tc.layout, tc.policy, tc.edit)
			rt := newRuntime(t)
			rt.runAgent(n.Extension)
			rt.waitPlugins(1)

			p := pod("p1", map[string]string{limit1M: "1Mi"})
			rpl, err := rt.create(p, ctr("c1", p, "app", ctrPath))
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "<root>", n.root)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("CreateContainer error %v\nwant it to hold %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rpl.GetAdjust().GetLinux().GetResources().GetUnified()["misc.max"]; got != tc.wantUnified {
				t.Errorf("adjustment's unified misc.max %q, want %q", got, tc.wantUnified)
			}
			if tc.wantWritten != "" {
				if got := n.readFile(t, n.misc(ctrPath), "misc.max"); got != tc.wantWritten {
					t.Errorf("misc.max %q, want %q", got, tc.wantWritten)
				}
			}
		})
	}
}
