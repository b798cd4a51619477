package deviceplugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// reloadPools changes testPools: exclusive_dp loses core 6, exclusive_rt goes, exclusive_new
// (singleThreaded, cores 6 and 7) comes, shared_caas stays.
const reloadPools = `
exclusiveCPUs: threads
pools:
  default:       {cpus: "0,8"}
  shared_caas:   {cpus: "1,9"}
  exclusive_dp:  {cpus: "2-5,10-13", hyperThreadingPolicy: multiThreaded}
  exclusive_new: {cpus: "6-7,14-15"}
`

func TestReload(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	node := testNode(t, testTopo, testPools)
	loop := newPasses(node)
	p, _ := runPlugin(t, node, Options{Dir: dir, Online: loop.Online})
	regs := k.registrations(t, 3)
	dp := dial(t, dir, regs["podfence.io/exclusive_dp"])
	stream, err := dp.ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	devicesOf(t, stream)

	if err := p.Reload(testNode(t, testTopo, reloadPools)); err != nil {
		t.Fatal(err)
	}
	if got := devicesOf(t, stream); len(got) != 8 || got["6"] != nil || got["14"] != nil {
		t.Errorf("exclusive_dp devices after reload: %d, want 8 without 6 and 14", len(got))
	}
	if _, err := dp.Allocate(ctxT(t), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: ids("6")}}}); err == nil || !strings.Contains(err.Error(), `unknown device "6"`) {
		t.Errorf("Allocate of a CPU the pool lost: %v", err)
	}
	if reg := k.registrations(t, 1); reg["podfence.io/exclusive_new"] == nil {
		t.Errorf("registrations after reload: %v, want exclusive_new only", reg)
	}
	loop.wait(t, 3) // registrations happen in a pass's sync: three more passes register nothing
	if len(k.reqs) != 0 {
		t.Errorf("%d more registrations: unchanged and changed pools need none", len(k.reqs))
	}
	if _, err := os.Stat(filepath.Join(dir, "podfence-exclusive_rt.sock")); err == nil {
		t.Error("removed pool exclusive_rt still served")
	}
	want := []string{"podfence.io/exclusive_dp", "podfence.io/exclusive_new", "podfence.io/shared_caas"}
	if got := p.Resources(); !slices.Equal(got, want) {
		t.Errorf("Resources() = %v, want %v", got, want)
	}
}

func TestReloadFromNoPools(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	node := testNode(t, testTopo, "pools: {default: {cpus: 0-15}}")
	loop := newPasses(node)
	p, _ := runPlugin(t, node, Options{Dir: dir, Online: loop.Online})
	if got := p.Resources(); len(got) != 0 {
		t.Errorf("Resources() = %v, want none", got)
	}
	loop.wait(t, 1) // Run serves nothing and loops: the reload comes to a running plugin
	if err := p.Reload(testNode(t, testTopo, testPools)); err != nil {
		t.Fatal(err)
	}
	k.registrations(t, 3)
}
