package dra_test

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/podfence/podfence/internal/dra"
)

// The DeviceClass selectors deploy/dra is meant to use.
const (
	exclusiveClass = `device.driver == "dra.podfence.io" && "cpus" in device.attributes["dra.podfence.io"]`
	sharedClass    = `device.driver == "dra.podfence.io" && "millicpu" in device.capacity["dra.podfence.io"]`
	epcClass       = `device.driver == "dra.podfence.io" && "epc" in device.capacity["dra.podfence.io"]`
	wholeCore      = `device.attributes["dra.podfence.io"].wholeCore`
)

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, dc := range c {
		out = append(out, dc)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("no DeviceClass %q", name)
}

func class(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

// allocate runs Kubernetes' structured-parameters allocator (the scheduler's) on the
// inventory's slices for one claim and returns its results.
func allocate(t *testing.T, inv *dra.Inventory, claim *resourceapi.ResourceClaim) []resourceapi.DeviceRequestAllocationResult {
	t.Helper()
	var slices []*resourceapi.ResourceSlice
	chunks := dra.Chunks(inv.Devices())
	for i, devs := range chunks {
		slices = append(slices, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("slice-%d", i)},
			Spec: resourceapi.ResourceSliceSpec{Driver: dra.DriverName, NodeName: ptr.To(node), Devices: devs,
				Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(len(chunks))}}})
	}
	cls := classes{
		"exclusive-cpus.podfence.io": class("exclusive-cpus.podfence.io", exclusiveClass),
		"shared-cpus.podfence.io":    class("shared-cpus.podfence.io", sharedClass),
		"sgx-epc.podfence.io":        class("sgx-epc.podfence.io", epcClass),
	}
	features := structured.Features{ConsumableCapacity: true}
	state := structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](), AggregatedCapacity: structured.NewConsumedCapacityCollection()}
	a, err := structured.NewAllocator(context.Background(), features, state, cls, slices,
		cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	if err != nil {
		t.Fatal(err)
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	res, err := a.Allocate(context.Background(), n, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("the allocator found no allocation for %s", claim.Name)
	}
	return res[0].Devices.Results
}

func request(name, class string, count int64, selectors ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return r
}

func claimOf(uid string, reqs []resourceapi.DeviceRequest, constraints ...resourceapi.DeviceConstraint) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: types.UID(uid)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Constraints: constraints}}}
}

// TestAllocatorFourCPUsWholeCoresOneNUMANode: "4 CPUs, whole cores, one NUMA node" is count 2
// of wholeCore devices with matchAttribute resource.kubernetes.io/numaNode. On the 4-NUMA
// EPYC the pool's first unit (core 7) is alone on NUMA node 0, so first fit without the
// constraint crosses NUMA nodes; with it the allocator takes cores 8 and 9 of node 1, and
// the grant gives their 4 threads.
func TestAllocatorFourCPUsWholeCoresOneNUMANode(t *testing.T) {
	topo := sysfs(t, "epyc-4numa-multi-l3")
	inv := inventory(t, topo, `pools:
  exclusive_dra: {cpus: "7-9,24", hyperThreadingPolicy: multiThreaded, requestAPI: dra}
  exclusive_rt: {cpus: "10-11", requestAPI: dra}
  default: {cpus: "0-1"}`, 0)
	numa := resourceapi.FullyQualifiedName(dra.AttrStandardNUMANode)
	for _, tc := range []struct {
		name        string
		constraints []resourceapi.DeviceConstraint
		wantCPUs    string
		wantNUMA    string
	}{
		{name: "without the constraint: first fit", wantCPUs: "7-8,39-40", wantNUMA: "0-1"},
		{name: "matchAttribute numaNode", constraints: []resourceapi.DeviceConstraint{{MatchAttribute: &numa}},
			wantCPUs: "8-9,40-41", wantNUMA: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := claimOf(claimA, []resourceapi.DeviceRequest{request("cpus", "exclusive-cpus.podfence.io", 2, wholeCore)},
				tc.constraints...)
			results := allocate(t, inv, claim)
			c := dra.ClaimOf(claim)
			c.PodUIDs, c.Results = []string{podA}, results
			g, err := inv.Grant(node, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			cpus := g.CPUs()
			if cpus.String() != tc.wantCPUs || topo.NUMANodesOf(cpus).String() != tc.wantNUMA || g.Pools()[0] != "exclusive_dra" {
				t.Errorf("granted %v on NUMA nodes %s, want CPUs %s on %s (results %+v)", g.Exclusive, topo.NUMANodesOf(cpus),
					tc.wantCPUs, tc.wantNUMA, results)
			}
		})
	}
}

// TestAllocatorSharedAndEPC: a claim for 1500 millicpu of the shared pool and 8 MiB EPC gets
// them as consumed capacity of the shared devices, which Grant turns into the grant; a
// request without an amount takes the policy's default (1 CPU, one EPC page).
func TestAllocatorSharedAndEPC(t *testing.T) {
	inv := inventory(t, sysfs(t, "dual-socket-smt-apart"), dualSocketConfig, 64<<20)
	for _, tc := range []struct {
		name             string
		millicpu, epc    string
		wantMilli, wantB int64
	}{
		{name: "amounts", millicpu: "1500", epc: "8Mi", wantMilli: 1500, wantB: 8 << 20},
		{name: "defaults", wantMilli: 1000, wantB: 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := request("share", "shared-cpus.podfence.io", 1)
			epc := request("epc", "sgx-epc.podfence.io", 1)
			if tc.millicpu != "" {
				shared.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					dra.CapMilliCPU: resource.MustParse(tc.millicpu)}}
				epc.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					dra.CapEPC: resource.MustParse(tc.epc)}}
			}
			claim := claimOf(claimA, []resourceapi.DeviceRequest{shared, epc})
			results := allocate(t, inv, claim)
			for _, r := range results {
				if r.ShareID == nil {
					t.Errorf("result %s has no shareID", r.Device)
				}
			}
			c := dra.ClaimOf(claim)
			c.PodUIDs, c.Results = []string{podA}, results
			g, err := inv.Grant(node, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if g.Shared["shared_dra"] != tc.wantMilli || g.EPCBytes != tc.wantB || len(g.Exclusive) != 0 {
				t.Errorf("grant %+v, want %d millicpu of shared_dra and %d bytes EPC", g, tc.wantMilli, tc.wantB)
			}
		})
	}
}

// TestAllocatorClassesApart: the exclusive class never selects the shared or EPC device, and
// the shared class no CPU unit.
func TestAllocatorClassesApart(t *testing.T) {
	inv := inventory(t, sysfs(t, "dual-socket-smt-apart"), dualSocketConfig, 64<<20)
	all := request("all", "exclusive-cpus.podfence.io", 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	var got []string
	for _, r := range allocate(t, inv, claimOf(claimA, []resourceapi.DeviceRequest{all})) {
		got = append(got, r.Device)
	}
	if fmt.Sprint(got) != "[cpu-4 cpu-5 cpu-28]" {
		t.Errorf("allocationMode All of the exclusive class: %v, want the 3 CPU units", got)
	}
	shared := request("s", "shared-cpus.podfence.io", 1)
	if r := allocate(t, inv, claimOf(claimA, []resourceapi.DeviceRequest{shared})); len(r) != 1 || r[0].Device != "shared-shared-dra" {
		t.Errorf("shared class: %+v", r)
	}
}
