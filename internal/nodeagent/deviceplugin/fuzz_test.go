package deviceplugin

import (
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/podfence/podfence/internal/cpu/allocate"
	"github.com/podfence/podfence/podapi"
)

// FuzzDeviceIDs feeds device ID lists from the kubelet to Allocate and
// GetPreferredAllocation, for a pool config that lists threads and one that lists cores: no
// panic, and an accepted exclusive allocation's annotations read back as exactly its devices'
// CPUs (with their whole cores when a device is a whole core).
func FuzzDeviceIDs(f *testing.F) {
	for _, seed := range []string{"2,10", "4", "7", "02", "+3", "-1", "shared_caas-0,shared_caas-1999",
		"shared_caas-2000", "shared_caas--1", "", ",", "99999999999999999999"} {
		f.Add(seed, int32(2))
	}
	var res []*resource
	for _, cfg := range []string{testPools, corePools} {
		node := testNode(f, testTopo, cfg)
		res = append(res, newResources(node, "podfence.io", node.Topology.Online())...)
	}
	f.Fuzz(func(t *testing.T, list string, size int32) {
		devs := strings.Split(list, ",")
		for _, r := range res {
			resp, err := r.allocate(devs)
			if err == nil && r.exclusive {
				want, _ := r.cpusOf(devs)
				if r.whole {
					want = r.owned.CoreThreads(allocate.SetOf(want)).CPUSet()
				}
				for _, key := range []string{podapi.AnnotationExclusiveCPUs, ExclusiveCPUsAnnotation(r.pool.Name)} {
					cpus, perr := podapi.ParseExclusiveCPUs(resp.Annotations[key])
					if perr != nil || !cpus.Equals(want) {
						t.Errorf("%s: devices %q → annotation %s %q → %v, %v; want %s", r.name, devs, key, resp.Annotations[key], cpus,
							perr, want)
					}
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
