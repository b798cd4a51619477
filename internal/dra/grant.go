package dra

import (
	"fmt"
	"math"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra/grant"
)

// Claim is what Grant reads of a ResourceClaim.
type Claim struct {
	UID, Namespace, Name string
	// PodUIDs are the pods in status.reservedFor.
	PodUIDs []string
	// Results are the claim's allocation results (status.allocation.devices.results).
	Results []resourceapi.DeviceRequestAllocationResult
}

// ClaimOf reads c's UID, names, reserved pods and allocation results.
func ClaimOf(c *resourceapi.ResourceClaim) Claim {
	out := Claim{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name}
	for _, r := range c.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" && r.UID != "" {
			out.PodUIDs = append(out.PodUIDs, string(r.UID))
		}
	}
	if a := c.Status.Allocation; a != nil {
		out.Results = a.Devices.Results
	}
	return out
}

func (c Claim) String() string { return fmt.Sprintf("claim %s/%s (%s)", c.Namespace, c.Name, c.UID) }

// Grant is what claim c gets of this node's devices in resource pool pool (the node's name):
// each unit's CPUs, the millicpu it consumes of the shared device, the bytes it consumes of
// the EPC device. It refuses, naming the claim, the device and the reason: a result of
// another pool, a device the inventory does not have (the layout changed), a unit given
// twice, admin access, a missing or not whole consumed capacity, CPUs another claim's grant
// holds (others, the prepared claims; c's own earlier grant is skipped), and more millicpu or
// EPC than the others leave. Results of other drivers are not read.
func (inv *Inventory) Grant(pool string, c Claim, others []grant.Grant) (grant.Grant, error) {
	g := grant.Grant{ClaimUID: c.UID, Namespace: c.Namespace, Name: c.Name, PodUIDs: c.PodUIDs}
	if err := grant.CheckUID("claim UID", c.UID); err != nil {
		return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
	}
	seen := map[string]bool{}
	mine := 0
	for _, r := range c.Results {
		if r.Driver != DriverName {
			continue
		}
		mine++
		if err := inv.add(&g, pool, r, seen); err != nil {
			return grant.Grant{}, fmt.Errorf("%s: device %q of pool %q (request %q): %w", c, r.Device, r.Pool, r.Request, err)
		}
	}
	if mine == 0 {
		return grant.Grant{}, fmt.Errorf("%s: no device of driver %s is allocated to it", c, DriverName)
	}
	if err := inv.checkOthers(g, others); err != nil {
		return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
	}
	if err := g.Check(); err != nil {
		return grant.Grant{}, fmt.Errorf("%s: %w", c, err)
	}
	return g, nil
}

// add adds allocation result r to g.
func (inv *Inventory) add(g *grant.Grant, pool string, r resourceapi.DeviceRequestAllocationResult, seen map[string]bool) error {
	switch {
	case r.Pool != pool:
		return fmt.Errorf("not this node's resource pool %q", pool)
	case r.AdminAccess != nil && *r.AdminAccess:
		return fmt.Errorf("adminAccess is not supported: CPUs and EPC are only handed out exclusively or by capacity")
	}
	if u, ok := inv.Unit(r.Device); ok {
		if seen[r.Device] {
			return fmt.Errorf("allocated twice in the claim")
		}
		seen[r.Device] = true
		if g.Exclusive == nil {
			g.Exclusive = map[string]cpuset.CPUSet{}
		}
		g.Exclusive[u.Pool] = g.Exclusive[u.Pool].Union(u.CPUs)
		return nil
	}
	switch {
	case inv.Shared != nil && r.Device == inv.Shared.Device:
		m, err := consumed(r, CapMilliCPU, inv.Shared.MilliCPU)
		if err != nil {
			return err
		}
		if g.Shared == nil {
			g.Shared = map[string]int64{}
		}
		if g.Shared[inv.Shared.Pool] += m; g.Shared[inv.Shared.Pool] > inv.Shared.MilliCPU {
			return fmt.Errorf("the claim consumes %d millicpu of shared pool %q, which has %d", g.Shared[inv.Shared.Pool],
				inv.Shared.Pool, inv.Shared.MilliCPU)
		}
	case inv.hasEPC() && r.Device == EPCDevice:
		b, err := consumed(r, CapEPC, inv.EPCBytes)
		if err != nil {
			return err
		}
		if g.EPCBytes += b; g.EPCBytes > inv.EPCBytes {
			return fmt.Errorf("the claim consumes %d bytes of EPC, the node has %d", g.EPCBytes, inv.EPCBytes)
		}
	default:
		return fmt.Errorf("not a device this node publishes now (%s): its pool config or CPUs changed since the allocation",
			inv.describe())
	}
	return nil
}

// consumed reads the whole, positive amount of capacity name that r consumes, at most max.
func consumed(r resourceapi.DeviceRequestAllocationResult, name resourceapi.QualifiedName, max int64) (int64, error) {
	q, ok := r.ConsumedCapacity[name]
	if !ok {
		return 0, fmt.Errorf("consumedCapacity has no %s (want the amount taken of this shared device: the cluster needs "+
			"DRA consumable capacity, on by default from Kubernetes 1.36)", name)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 || n > max || q.Cmp(*resource.NewQuantity(n, resource.DecimalSI)) != 0 {
		return 0, fmt.Errorf("consumedCapacity %s=%s: want a whole number from 1 to %d", name, q.String(), max)
	}
	return n, nil
}

// checkOthers refuses g when another claim's grant holds one of its CPUs, or when the
// others leave less millicpu or EPC than g takes.
func (inv *Inventory) checkOthers(g grant.Grant, others []grant.Grant) error {
	cpus := g.CPUs()
	var sharedUsed, epcUsed int64
	for _, o := range others {
		if o.ClaimUID == g.ClaimUID {
			continue
		}
		if both := cpus.Intersection(o.CPUs()); !both.IsEmpty() {
			return fmt.Errorf("CPUs %s are already prepared for claim %s/%s (%s)", both, o.Namespace, o.Name, o.ClaimUID)
		}
		if inv.Shared != nil {
			sharedUsed = satAdd(sharedUsed, o.Shared[inv.Shared.Pool])
		}
		epcUsed = satAdd(epcUsed, o.EPCBytes)
	}
	if s := inv.Shared; s != nil && g.Shared[s.Pool] > 0 {
		if free := max(s.MilliCPU-sharedUsed, 0); g.Shared[s.Pool] > free {
			return fmt.Errorf("shared pool %q: requested=%d millicpu, free=%d of %d (the other prepared claims hold the rest)",
				s.Pool, g.Shared[s.Pool], free, s.MilliCPU)
		}
	}
	if g.EPCBytes > 0 {
		if free := max(inv.EPCBytes-epcUsed, 0); g.EPCBytes > free {
			return fmt.Errorf("SGX EPC: requested=%d bytes, free=%d of %d (the other prepared claims hold the rest)",
				g.EPCBytes, free, inv.EPCBytes)
		}
	}
	return nil
}

// satAdd adds two non-negative amounts, stopping at MaxInt64.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// describe names the devices, for errors: "4 CPU units of exclusive_dra, shared-shared-dra, sgx-epc".
func (inv *Inventory) describe() string {
	count := map[string]int{}
	var order []string
	for _, u := range inv.Units {
		if count[u.Pool] == 0 {
			order = append(order, u.Pool)
		}
		count[u.Pool]++
	}
	var parts []string
	for _, p := range order {
		parts = append(parts, fmt.Sprintf("%d CPU units of %s", count[p], p))
	}
	if inv.Shared != nil {
		parts = append(parts, inv.Shared.Device)
	}
	if inv.hasEPC() {
		parts = append(parts, EPCDevice)
	}
	if len(parts) == 0 {
		return "it publishes no devices"
	}
	return "it publishes " + strings.Join(parts, ", ")
}
