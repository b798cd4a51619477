package deviceplugin

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/podapi"
)

// ids splits "2,10" into device IDs; "" is none.
func ids(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// sharedIDs returns shared_caas-<from> … shared_caas-<to-1>.
func sharedIDs(from, to int) []string {
	var out []string
	for n := from; n < to; n++ {
		out = append(out, fmt.Sprintf("shared_caas-%d", n))
	}
	return out
}

// allDP is every device of exclusive_dp (cores 2,3 on NUMA 0; 4,5,6 on NUMA 1).
var allDP = ids("2,3,4,5,6,10,11,12,13,14")

func without(all []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(id string) bool { return slices.Contains(drop, id) })
}

func TestGetPreferredAllocation(t *testing.T) {
	_, clients := started(t)
	for _, tc := range []struct {
		name     string
		resource string
		avail    []string
		must     []string
		size     int32
		want     []string // sorted by the test
		wantErr  string
	}{
		{name: "one whole core, packed on the fuller NUMA node", resource: "exclusive_dp", avail: allDP, size: 2,
			want: ids("10,2")},
		{name: "whole core, not the broken one", resource: "exclusive_dp", avail: without(allDP, "10"), size: 2,
			want: ids("11,3")},
		{name: "core and a half on one NUMA node", resource: "exclusive_dp", avail: allDP, size: 3,
			want: ids("10,2,3")},
		{name: "one NUMA node over packing", resource: "exclusive_dp", avail: allDP, size: 6,
			want: ids("12,13,14,4,5,6")},
		{name: "partial core completes a request before a whole one", resource: "exclusive_dp",
			avail: without(allDP, "2"), size: 3, want: ids("10,11,3")},
		{name: "one NUMA node before a partial core elsewhere", resource: "exclusive_dp",
			avail: without(allDP, "2", "3", "11"), size: 3, want: ids("12,4,5")},
		{name: "must-include gets its sibling", resource: "exclusive_dp", avail: allDP, must: ids("4"), size: 2,
			want: ids("12,4")},
		// The kubelet's reuse: an app container's must-include devices are a plain init
		// container's; a sidecar's are neither must-include nor available (still its own),
		// so its CPU 12 is not taken beside must-include CPU 4, its sibling.
		{name: "must-include's sibling a sidecar holds", resource: "exclusive_dp", avail: without(allDP, "4", "12"),
			must: ids("4"), size: 2, want: ids("4,5")},
		{name: "must-include keeps its NUMA node", resource: "exclusive_dp", avail: allDP, must: ids("4"), size: 4,
			want: ids("12,13,4,5")},
		{name: "must-include outside available", resource: "exclusive_dp", avail: ids("2,10"), must: ids("6"), size: 2,
			want: ids("2,6")},
		{name: "singleThreaded: one device per core", resource: "exclusive_rt", avail: ids("7"), size: 1,
			want: ids("7")},
		{name: "shared: must-include first", resource: "shared_caas", avail: sharedIDs(0, 5),
			must: ids("shared_caas-1500"), size: 3, want: ids("shared_caas-0,shared_caas-1,shared_caas-1500")},
		{name: "unknown exclusive ID", resource: "exclusive_dp", avail: ids("2,7"), size: 1,
			wantErr: `available devices: unknown device "7": the devices of podfence.io/exclusive_dp are the CPU IDs 2-6,10-14`},
		{name: "unknown must-include ID", resource: "exclusive_dp", avail: ids("2"), must: ids("02"), size: 1,
			wantErr: `must-include devices: unknown device "02"`},
		{name: "too few available", resource: "exclusive_dp", avail: ids("2,10"), size: 3,
			wantErr: "cannot choose 3 devices of podfence.io/exclusive_dp: 0 must be included, 2 are available"},
		{name: "unknown shared ID", resource: "shared_caas", avail: ids("shared_caas-2000"), size: 1,
			wantErr: `unknown device "shared_caas-2000": the devices of podfence.io/shared_caas are shared_caas-0 to shared_caas-1999`},
		{name: "shared: too few", resource: "shared_caas", avail: sharedIDs(0, 2), size: 3,
			wantErr: "cannot choose 3 devices of podfence.io/shared_caas: 0 must be included, 2 are available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := clients["podfence.io/"+tc.resource].GetPreferredAllocation(ctxT(t), &pluginapi.PreferredAllocationRequest{
				ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
					{AvailableDeviceIDs: tc.avail, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size}}})
			if tc.wantErr != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v\nwant InvalidArgument containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(slices.Values(resp.ContainerResponses[0].DeviceIDs))
			if !slices.Equal(got, tc.want) {
				t.Errorf("preferred %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllocate(t *testing.T) {
	_, clients := started(t)
	for _, tc := range []struct {
		name        string
		resource    string
		devices     []string
		env         map[string]string
		annotations map[string]string
		wantErr     string
	}{
		{name: "exclusive", resource: "exclusive_dp", devices: ids("12,4"),
			env:         map[string]string{plan.EnvExclusiveCPUs: "4,12"},
			annotations: map[string]string{podapi.AnnotationExclusiveCPUs: "4,12", "podfence.io/exclusive-cpus.exclusive_dp": "4,12"}},
		{name: "exclusive range", resource: "exclusive_dp", devices: ids("4,2,3,10"),
			env:         map[string]string{plan.EnvExclusiveCPUs: "2,3,4,10"},
			annotations: map[string]string{podapi.AnnotationExclusiveCPUs: "2-4,10", "podfence.io/exclusive-cpus.exclusive_dp": "2-4,10"}},
		{name: "singleThreaded", resource: "exclusive_rt", devices: ids("7"),
			env:         map[string]string{plan.EnvExclusiveCPUs: "7"},
			annotations: map[string]string{podapi.AnnotationExclusiveCPUs: "7", "podfence.io/exclusive-cpus.exclusive_rt": "7"}},
		{name: "shared", resource: "shared_caas", devices: sharedIDs(0, 500),
			env: map[string]string{plan.EnvSharedCPUs: "1,9"}},
		{name: "CPU of another pool", resource: "exclusive_dp", devices: ids("2,1"),
			wantErr: `unknown device "1": the devices of podfence.io/exclusive_dp are the CPU IDs 2-6,10-14`},
		{name: "idled sibling is no device", resource: "exclusive_rt", devices: ids("15"),
			wantErr: `unknown device "15": the devices of podfence.io/exclusive_rt are the CPU IDs 7`},
		{name: "not a CPU ID", resource: "exclusive_dp", devices: ids("cpu2"), wantErr: `unknown device "cpu2"`},
		{name: "shared ID of another pool", resource: "shared_caas", devices: ids("shared_other-1"),
			wantErr: `unknown device "shared_other-1"`},
		{name: "shared ID too high", resource: "shared_caas", devices: ids("shared_caas-2000"),
			wantErr: `unknown device "shared_caas-2000"`},
		{name: "no devices", resource: "shared_caas", wantErr: "no devices of podfence.io/shared_caas to allocate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := clients["podfence.io/"+tc.resource].Allocate(ctxT(t), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tc.devices}}})
			if tc.wantErr != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v\nwant InvalidArgument containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := resp.ContainerResponses[0]
			if !maps.Equal(r.Envs, tc.env) || !maps.Equal(r.Annotations, tc.annotations) {
				t.Errorf("env %v annotations %v\nwant env %v annotations %v", r.Envs, r.Annotations, tc.env, tc.annotations)
			}
			if v, ok := r.Annotations[podapi.AnnotationExclusiveCPUs]; ok {
				if cpus, err := podapi.ParseExclusiveCPUs(v); err != nil || cpus.Size() != len(tc.devices) {
					t.Errorf("the agent reads %q as %v, %v", v, cpus, err)
				}
			}
		})
	}
}
