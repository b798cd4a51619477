package dra_test

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra"
	"github.com/podfence/podfence/internal/dra/grant"
)

// FuzzGrant: allocation results come from the API server. Whatever two results say, Grant
// refuses them or returns a grant that passes Check, gives only published CPUs that the
// other claim does not hold, and stays within the shared pool's and the EPC's capacity.
func FuzzGrant(f *testing.F) {
	f.Add("cpu-4", node, "", "", "cpu-28", "", false)
	f.Add("shared-shared-dra", node, "millicpu", "150", "sgx-epc", "4Mi", false)
	f.Add("sgx-epc", node, "epc", "1e3", "shared-shared-dra", "9223372036854775807", true)
	f.Add("cpu-5", "node-b", "millicpu", "-1", "cpu-4", "0.5", false)
	inv := inventory(f, sysfs(f, "dual-socket-smt-apart"), dualSocketConfig, 64<<20)
	units := cpuset.New()
	for _, u := range inv.Units {
		units = units.Union(u.CPUs)
	}
	other := grant.Grant{ClaimUID: claimB, PodUIDs: []string{podA}, Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(5, 53)},
		Shared: map[string]int64{"shared_dra": 500}, EPCBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, dev1, pool1, capName, q1, dev2, q2 string, admin bool) {
		var results []resourceapi.DeviceRequestAllocationResult
		for _, r := range []struct{ dev, pool, q string }{{dev1, pool1, q1}, {dev2, node, q2}} {
			res := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: dra.DriverName, Pool: r.pool, Device: r.dev,
				AdminAccess: &admin}
			if q, err := resource.ParseQuantity(r.q); err == nil {
				res.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
					resourceapi.QualifiedName(dra.DriverName + "/" + capName): q}
			}
			results = append(results, res)
		}
		g, err := inv.Grant(node, dra.Claim{UID: claimA, PodUIDs: []string{podA}, Results: results}, []grant.Grant{other})
		if err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("grant %+v fails Check: %v", g, err)
		}
		if cpus := g.CPUs(); !cpus.IsSubsetOf(units) || !cpus.Intersection(other.CPUs()).IsEmpty() {
			t.Fatalf("grant gives CPUs %s: published %s, the other claim holds %s", cpus, units, other.CPUs())
		}
		if g.Shared["shared_dra"]+other.Shared["shared_dra"] > inv.Shared.MilliCPU || g.EPCBytes+other.EPCBytes > inv.EPCBytes {
			t.Fatalf("grant %+v with the other claim's exceeds capacity", g)
		}
	})
}
