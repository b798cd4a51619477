package deviceplugin

import (
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/podfence/podfence/podapi"
)

// FuzzDeviceIDs feeds device ID lists from the kubelet to Allocate and
// GetPreferredAllocation: no panic, and an accepted exclusive allocation's annotation reads
// back as exactly its devices.
func FuzzDeviceIDs(f *testing.F) {
	for _, seed := range []string{"2,10", "4", "7", "02", "+3", "-1", "shared_caas-0,shared_caas-1999",
		"shared_caas-2000", "shared_caas--1", "", ",", "99999999999999999999"} {
		f.Add(seed, int32(2))
	}
	node := testNode(f, testTopo, testPools)
	res := newResources(node, "podfence.io", node.Topology.Online())
	f.Fuzz(func(t *testing.T, list string, size int32) {
		devs := strings.Split(list, ",")
		for _, r := range res {
			resp, err := r.allocate(devs)
			if err == nil && r.exclusive {
				cpus, perr := podapi.ParseExclusiveCPUs(resp.Annotations[podapi.AnnotationExclusiveCPUs])
				if want, _ := r.cpusOf(devs); perr != nil || !cpus.Equals(want) {
					t.Errorf("%s: devices %q → annotation %q → %v, %v", r.name, devs, resp.Annotations, cpus, perr)
				}
			}
			got, err := r.preferred(&pluginapi.ContainerPreferredAllocationRequest{
				AvailableDeviceIDs: devs, AllocationSize: size})
			if err == nil && len(got) != int(size) {
				t.Errorf("%s: preferred %d of %q: got %v", r.name, size, devs, got)
			}
		}
	})
}
