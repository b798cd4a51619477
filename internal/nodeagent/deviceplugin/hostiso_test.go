package deviceplugin

import (
	"slices"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/cpuset"
)

// TestIsolatedCPUsDevices: a pool with isolatedCPUs: require offers only the devices of
// host-isolated units; one with prefer offers all, and prefers those.
func TestIsolatedCPUsDevices(t *testing.T) {
	node := testNode(t, testTopo+",isolcpus=3-4,6,11-12,14", `
exclusiveCPUs: threads
pools:
  default:     {cpus: "0-1,8-9"}
  exclusive_p: {cpus: "2-5,10-13", hyperThreadingPolicy: multiThreaded, isolatedCPUs: prefer}
  exclusive_r: {cpus: "6-7,14-15", hyperThreadingPolicy: multiThreaded, isolatedCPUs: require}
`)
	res := map[string]*resource{}
	for _, r := range newResources(node, "podfence.io", node.Topology.Online()) {
		res[r.pool.Name] = r
	}
	for pool, want := range map[string][]string{"exclusive_p": ids("2,3,4,5,10,11,12,13"), "exclusive_r": ids("6,14")} {
		devs, _ := res[pool].devices()
		var got []string
		for _, d := range devs {
			got = append(got, d.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s devices %v, want %v", pool, got, want)
		}
	}
	got, err := res["exclusive_p"].preferred(&pluginapi.ContainerPreferredAllocationRequest{
		AvailableDeviceIDs: ids("2,3,4,5,10,11,12,13"), AllocationSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := res["exclusive_p"].cpusOf(got); !s.Equals(cpuset.New(3, 11)) {
		t.Errorf("preferred %v, want the isolated core 3 (3,11), not core 2", got)
	}
}

// TestSameIsolatedCPUs: a pool whose isolatedCPUs changed is a new resource (its preferred
// devices differ), though its devices are the same.
func TestSameIsolatedCPUs(t *testing.T) {
	const spec = testTopo + ",isolcpus=3-4,11-12"
	of := func(choice string) *resource {
		node := testNode(t, spec, "exclusiveCPUs: threads\npools: {default: {cpus: \"0-1,8-9\"}, exclusive_p: {cpus: \"2-5,10-13\""+
			choice+"}}")
		return newResources(node, "podfence.io", node.Topology.Online())[0]
	}
	plain, prefer := of(""), of(", isolatedCPUs: prefer")
	if !plain.same(of("")) || !prefer.same(of(", isolatedCPUs: prefer")) {
		t.Error("a resource is not the same as itself")
	}
	if plain.same(prefer) || prefer.same(plain) {
		t.Error("isolatedCPUs: prefer set is the same resource as unset")
	}
}
