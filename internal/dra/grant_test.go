package dra_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
)

// result is an allocation result of this driver in node's pool; consumed is "" or
// "<capacity>=<quantity>".
func result(device, consumed string) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: "req", Driver: dra.DriverName, Pool: node, Device: device}
	if name, q, ok := strings.Cut(consumed, "="); ok {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
			resourceapi.QualifiedName(dra.DriverName + "/" + name): resource.MustParse(q)}
	}
	return r
}

func TestGrant(t *testing.T) {
	inv := inventory(t, sysfs(t, "dual-socket-smt-apart"), dualSocketConfig, 64<<20)
	other := grant.Grant{ClaimUID: claimB, Namespace: "ns", Name: "other", PodUIDs: []string{"p2"},
		Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(5, 53)}, Shared: map[string]int64{"shared_dra": 1800},
		EPCBytes: 60 << 20}
	mine := func(results ...resourceapi.DeviceRequestAllocationResult) dra.Claim {
		return dra.Claim{UID: claimA, Namespace: "ns", Name: "cpus", PodUIDs: []string{podA}, Results: results}
	}
	const prefix = "claim ns/cpus (" + claimA + "): "
	for _, tc := range []struct {
		name    string
		claim   dra.Claim
		others  []grant.Grant
		want    grant.Grant // when wantErr is ""
		wantErr string
	}{{
		name:  "two whole cores, other drivers' results ignored",
		claim: mine(result("cpu-4", ""), result("cpu-28", ""), resourceapi.DeviceRequestAllocationResult{Driver: "gpu.example.com", Pool: node, Device: "cpu-5"}),
		want: grant.Grant{ClaimUID: claimA, Namespace: "ns", Name: "cpus", PodUIDs: []string{podA},
			Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(4, 52, 28, 76)}},
	}, {
		name:  "shared millicpu and EPC, within what the other claim leaves",
		claim: mine(result("shared-shared-dra", "millicpu=200"), result("sgx-epc", "epc=4Mi")), others: []grant.Grant{other},
		want: grant.Grant{ClaimUID: claimA, Namespace: "ns", Name: "cpus", PodUIDs: []string{podA},
			Shared: map[string]int64{"shared_dra": 200}, EPCBytes: 4 << 20},
	}, {
		name:  "the claim's own earlier grant does not count against it",
		claim: mine(result("cpu-5", "")), others: []grant.Grant{{ClaimUID: claimA, PodUIDs: []string{podA},
			Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(5, 53)}}},
		want: grant.Grant{ClaimUID: claimA, Namespace: "ns", Name: "cpus", PodUIDs: []string{podA},
			Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(5, 53)}},
	}, {
		name: "CPUs another claim holds", claim: mine(result("cpu-4", ""), result("cpu-5", "")), others: []grant.Grant{other},
		wantErr: prefix + "CPUs 5,53 are already prepared for claim ns/other (" + claimB + ")",
	}, {
		name: "more millicpu than free", claim: mine(result("shared-shared-dra", "millicpu=300")), others: []grant.Grant{other},
		wantErr: prefix + `shared pool "shared_dra": requested=300 millicpu, free=200 of 2000`,
	}, {
		name: "more EPC than free", claim: mine(result("sgx-epc", "epc=8Mi")), others: []grant.Grant{other},
		wantErr: prefix + "SGX EPC: requested=8388608 bytes, free=4194304 of 67108864",
	}, {
		name: "a device plugin pool's CPU", claim: mine(result("cpu-6", "")),
		wantErr: prefix + `device "cpu-6" of pool "node-a" (request "req"): not a device this node publishes now (it publishes ` +
			`3 CPU units of exclusive_dra, shared-shared-dra, sgx-epc): its pool config or CPUs changed since the allocation`,
	}, {
		name:    "another node's pool",
		claim:   mine(resourceapi.DeviceRequestAllocationResult{Request: "req", Driver: dra.DriverName, Pool: "node-b", Device: "cpu-4"}),
		wantErr: prefix + `device "cpu-4" of pool "node-b" (request "req"): not this node's resource pool "node-a"`,
	}, {
		name: "a unit twice", claim: mine(result("cpu-4", ""), result("cpu-4", "")),
		wantErr: prefix + `device "cpu-4" of pool "node-a" (request "req"): allocated twice in the claim`,
	}, {
		name: "admin access",
		claim: mine(func() resourceapi.DeviceRequestAllocationResult {
			r := result("cpu-4", "")
			r.AdminAccess = ptr.To(true)
			return r
		}()),
		wantErr: "adminAccess is not supported",
	}, {
		name: "shared without consumed capacity", claim: mine(result("shared-shared-dra", "")),
		wantErr: "consumedCapacity has no dra.podfence.io/millicpu",
	}, {
		name: "shared in fractions of a millicpu", claim: mine(result("shared-shared-dra", "millicpu=500m")),
		wantErr: "consumedCapacity dra.podfence.io/millicpu=500m: want a whole number from 1 to 2000",
	}, {
		name: "shared beyond the pool", claim: mine(result("shared-shared-dra", "millicpu=2001")),
		wantErr: "consumedCapacity dra.podfence.io/millicpu=2001: want a whole number from 1 to 2000",
	}, {
		name: "shared twice beyond the pool", claim: mine(result("shared-shared-dra", "millicpu=1500"), result("shared-shared-dra", "millicpu=600")),
		wantErr: `the claim consumes 2100 millicpu of shared pool "shared_dra", which has 2000`,
	}, {
		name: "EPC capacity of the wrong name", claim: mine(result("sgx-epc", "millicpu=1")),
		wantErr: "consumedCapacity has no dra.podfence.io/epc",
	}, {
		name:    "no device of this driver",
		claim:   mine(resourceapi.DeviceRequestAllocationResult{Driver: "gpu.example.com", Pool: node, Device: "gpu-0"}),
		wantErr: prefix + "no device of driver dra.podfence.io is allocated to it",
	}, {
		name:    "reserved for no pod",
		claim:   dra.Claim{UID: claimA, Namespace: "ns", Name: "cpus", Results: []resourceapi.DeviceRequestAllocationResult{result("cpu-4", "")}},
		wantErr: prefix + "claim " + claimA + ": podUIDs has 0 entries",
	}, {
		name:    "a claim UID that is no UID",
		claim:   dra.Claim{UID: "../x", Namespace: "ns", Name: "cpus", PodUIDs: []string{podA}},
		wantErr: `claim ns/cpus (../x): claim UID "../x": has the character '.'`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inv.Grant(node, tc.claim, tc.others)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Grant = %+v, %v; want an error with %q", got, err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Grant: %v", err)
			case tc.wantErr == "" && !reflect.DeepEqual(got, tc.want):
				t.Errorf("Grant = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestGrantSingleThreaded: a singleThreaded unit grants its one thread; the planner keeps
// the sibling idle.
func TestGrantSingleThreaded(t *testing.T) {
	inv := inventory(t, synthetic(t, "cores=4,threads=2"), "pools: {exclusive_rt: {cpus: \"1-2\", requestAPI: dra}, default: {cpus: \"0\"}}", 0)
	g, err := inv.Grant(node, dra.Claim{UID: claimA, PodUIDs: []string{podA}, Results: []resourceapi.DeviceRequestAllocationResult{
		result("cpu-1", ""), result("cpu-2", "")}}, nil)
	if err != nil || g.Exclusive["exclusive_rt"].String() != "1-2" {
		t.Errorf("Grant = %+v, %v; want exclusive_rt 1-2", g, err)
	}
}

func TestClaimOf(t *testing.T) {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{UID: claimA, Namespace: "ns", Name: "cpus"},
		Status: resourceapi.ResourceClaimStatus{
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{
				{Resource: "pods", Name: "a", UID: podA},
				{APIGroup: "batch", Resource: "jobs", Name: "j", UID: "job-uid"},
				{Resource: "pods", Name: "b", UID: "pod-b"},
			},
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{result("cpu-4", "")}}},
		},
	}
	got := dra.ClaimOf(c)
	if got.UID != claimA || got.Namespace != "ns" || got.Name != "cpus" || !reflect.DeepEqual(got.PodUIDs, []string{podA, "pod-b"}) ||
		len(got.Results) != 1 || got.Results[0].Device != "cpu-4" {
		t.Errorf("ClaimOf = %+v", got)
	}
	if got := dra.ClaimOf(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(claimB)}}); got.Results != nil || got.PodUIDs != nil {
		t.Errorf("ClaimOf(unallocated) = %+v", got)
	}
}

// TestCDISpec: the spec is valid at its version (the CDI library's own check), and its one
// device, named by the claim UID, sets only the marker the node agent reads.
func TestCDISpec(t *testing.T) {
	data, err := dra.CDISpec(claimA)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if err := cdispec.ValidateVersion(&spec); err != nil {
		t.Errorf("ValidateVersion: %v", err)
	}
	env := grant.EnvName(claimA) + "=" + claimA
	if spec.Kind != "dra.podfence.io/claim" || len(spec.Devices) != 1 || spec.Devices[0].Name != claimA ||
		!reflect.DeepEqual(spec.Devices[0].ContainerEdits, cdispec.ContainerEdits{Env: []string{env}}) {
		t.Errorf("spec = %s", data)
	}
	uids, err := grant.ClaimsInEnv(spec.Devices[0].ContainerEdits.Env)
	if err != nil || !reflect.DeepEqual(uids, []string{claimA}) {
		t.Errorf("ClaimsInEnv(spec env) = %v, %v", uids, err)
	}
	if dra.CDIDeviceID(claimA) != "dra.podfence.io/claim="+claimA || dra.CDISpecFile(claimA) != "dra.podfence.io-"+claimA+".json" {
		t.Errorf("CDIDeviceID %s, CDISpecFile %s", dra.CDIDeviceID(claimA), dra.CDISpecFile(claimA))
	}
	if _, err := dra.CDISpec("a/b"); err == nil {
		t.Error("CDISpec(a/b) accepted")
	}
}
