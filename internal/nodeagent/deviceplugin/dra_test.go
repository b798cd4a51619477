package deviceplugin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// draPools: exclusive_dp and shared_caas are requested through DRA, exclusive_rt through
// the device plugin.
const draPools = `
exclusiveCPUs: threads
pools:
  default:      {cpus: "0,8"}
  shared_caas:  {cpus: "1,9", requestAPI: dra}
  exclusive_dp: {cpus: "2-6,10-14", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_rt: {cpus: "7,15", requestAPI: devicePlugin}
`

// TestDRAPoolsNotAdvertised: pools with requestAPI: dra get no resource, registration or
// socket, at start and after a reload that moves a pool to DRA.
func TestDRAPoolsNotAdvertised(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir)
	p, _ := runPlugin(t, testNode(t, testTopo, draPools), Options{Dir: dir})
	if got, want := p.Resources(), []string{"podfence.io/exclusive_rt"}; !slices.Equal(got, want) {
		t.Errorf("Resources() = %v, want %v", got, want)
	}
	if regs := k.registrations(t, 1); regs["podfence.io/exclusive_rt"] == nil {
		t.Errorf("registrations %v, want exclusive_rt", regs)
	}
	for _, pool := range []string{"exclusive_dp", "shared_caas"} {
		if _, err := os.Stat(filepath.Join(dir, "podfence-"+pool+".sock")); err == nil {
			t.Errorf("DRA pool %s is served", pool)
		}
	}

	if err := p.Reload(testNode(t, testTopo, testPools)); err != nil { // back to the device plugin
		t.Fatal(err)
	}
	k.registrations(t, 2)
	if err := p.Reload(testNode(t, testTopo, draPools)); err != nil {
		t.Fatal(err)
	}
	if got, want := p.Resources(), []string{"podfence.io/exclusive_rt"}; !slices.Equal(got, want) {
		t.Errorf("after a reload to DRA: Resources() = %v, want %v", got, want)
	}
}
