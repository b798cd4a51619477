package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/epc"
)

// CodeDRAClaim is the refusal code of a container refused for one of its DRA claims.
const CodeDRAClaim = "DRAClaim"

// ClaimError refuses a container for one of its DRA claims (UID: the claim's UID, or its
// namespace/name where the UID is not known).
type ClaimError struct {
	UID string
	Err error
}

func (e *ClaimError) Error() string { return fmt.Sprintf("DRA claim %s: %v", e.UID, e.Err) }
func (e *ClaimError) Unwrap() error { return e.Err }

// Claims is what the DRA claims of one container give it, summed over the claims (Add each
// grant in claim UID order, so that an error names the same claim every time).
type Claims struct {
	UIDs      []string
	Exclusive map[string]cpuset.CPUSet // by pool
	Shared    map[string]int64         // millicpu by pool
	EPCBytes  int64
	from      map[string]string // pool → the claim that gave it first, for errors
}

// Add sums grant g of a claim the container of pod podUID (podName, for errors) uses: a claim
// not reserved for the pod, or giving a CPU another of its claims gives, is an error.
// Nothing else of a grant is trusted here: its CPUs and shares go through the planner like
// any request (Node.WithClaims).
func (cl *Claims) Add(g grant.Grant, podUID, podName string) error {
	if !g.UsedBy(podUID) {
		return &ClaimError{UID: g.ClaimUID, Err: fmt.Errorf("claim %s/%s is reserved for pods %s, not for pod %s (%s)",
			g.Namespace, g.Name, strings.Join(g.PodUIDs, ", "), podName, podUID)}
	}
	if cl.Exclusive == nil {
		cl.Exclusive, cl.Shared, cl.from = map[string]cpuset.CPUSet{}, map[string]int64{}, map[string]string{}
	}
	cl.UIDs = append(cl.UIDs, g.ClaimUID)
	for _, pool := range slices.Sorted(maps.Keys(g.Exclusive)) {
		cpus, had := g.Exclusive[pool], cl.Exclusive[pool]
		if both := had.Intersection(cpus); !both.IsEmpty() {
			return &ClaimError{UID: g.ClaimUID, Err: fmt.Errorf("exclusive pool %q: CPUs %s are also given by claim %s", pool, both,
				cl.from[pool])}
		}
		cl.Exclusive[pool] = had.Union(cpus)
		cl.note(pool, g.ClaimUID)
	}
	for _, pool := range slices.Sorted(maps.Keys(g.Shared)) {
		cl.Shared[pool] += g.Shared[pool]
		cl.note(pool, g.ClaimUID)
	}
	cl.EPCBytes += g.EPCBytes
	return nil
}

func (cl *Claims) note(pool, uid string) {
	if _, ok := cl.from[pool]; !ok {
		cl.from[pool] = uid
	}
}

// WithClaims adds cl to c: each pool must be a pool of this node that pods request through
// DRA (requestAPI: dra) and that c does not ask for otherwise; exclusive CPUs must be the
// pool's, and become exact CPUs of it. Whether they are free is the planner's call (a CPU
// another container holds is refused there, whichever API gave it).
func (n *Node) WithClaims(c Container, cl Claims) (Container, error) {
	req := make(Request, len(c.Request)+len(cl.Exclusive)+len(cl.Shared))
	maps.Copy(req, c.Request)
	check := func(pool string, typ allocation.PoolType) error {
		p, ok := n.Pools.Pool(pool)
		switch {
		case !ok || p.Type != typ:
			return fmt.Errorf("gives %s pool %q, which this node does not have", typ, pool)
		case !p.ViaDRA():
			return fmt.Errorf("gives pool %q, which this node's pool config does not offer through DRA (requestAPI: %s)", pool, p.API)
		}
		if _, asked := req[pool]; asked {
			return fmt.Errorf("gives pool %q, which the container also asks for through its annotations or devices", pool)
		}
		return nil
	}
	for _, pool := range slices.Sorted(maps.Keys(cl.Exclusive)) {
		cpus := cl.Exclusive[pool]
		if err := check(pool, allocation.TypeExclusive); err != nil {
			return c, &ClaimError{UID: cl.from[pool], Err: err}
		}
		p, _ := n.Pools.Pool(pool)
		if out := cpus.Difference(p.CPUs.Union(n.Pools.Offline[pool])); !out.IsEmpty() {
			return c, &ClaimError{UID: cl.from[pool], Err: fmt.Errorf("gives CPUs %s, which are not in exclusive pool %q (%s)",
				out, pool, p.CPUs)}
		}
		req[pool] = *resource.NewQuantity(int64(n.Units(pool, cpus)), resource.DecimalSI)
		c.ExclusiveCPUs = c.ExclusiveCPUs.Union(cpus)
	}
	for _, pool := range slices.Sorted(maps.Keys(cl.Shared)) {
		if err := check(pool, allocation.TypeShared); err != nil {
			return c, &ClaimError{UID: cl.from[pool], Err: err}
		}
		req[pool] = *resource.NewQuantity(cl.Shared[pool], resource.DecimalSI)
	}
	c.Request = req
	return c, nil
}

// CheckClaimsEPC refuses claims that give SGX EPC to a container whose limit annotation
// (epc-limit.nri.io/container.<name>, among the pod's annotations) is set already: one
// limit, one source. Without it the claims' EPC becomes the container's limit.
func CheckClaimsEPC(annotations map[string]string, container string, cl Claims) error {
	key := epc.AnnotationContainerPrefix + container
	if v, ok := annotations[key]; ok && cl.EPCBytes > 0 {
		return &ClaimError{UID: strings.Join(cl.UIDs, ","), Err: fmt.Errorf("gives SGX EPC %d bytes, but annotation %s=%q "+
			"sets the container's limit too: ask for EPC through the claim or the resource sgx.intel.com/epc, not both",
			cl.EPCBytes, key, v)}
	}
	return nil
}

// withPodClaims adds to c what the DRA claims container spec uses give it: each claim the
// container names (resources.claims) is the ResourceClaim of the pod's resourceClaims entry
// (resourceClaimName, or for a template the one the pod's status names), and its grant the
// one grants holds for that namespace/name. A claim without a grant is another driver's:
// passed over. The grants are summed in claim UID order, as the agent reads them from the
// container's environment, and checked as the agent checks them (Claims.Add, WithClaims,
// CheckClaimsEPC).
func (n *Node) withPodClaims(c Container, pod *corev1.Pod, spec corev1.Container, grants map[string]grant.Grant) (Container, error) {
	if len(spec.Resources.Claims) == 0 || len(grants) == 0 {
		return c, nil
	}
	var used []grant.Grant
	for _, rc := range spec.Resources.Claims {
		obj, ok := claimObject(pod, rc.Name)
		if !ok {
			continue
		}
		g, ok := grants[c.Namespace+"/"+obj]
		if ok && !slices.ContainsFunc(used, func(u grant.Grant) bool { return u.ClaimUID == g.ClaimUID }) {
			used = append(used, g)
		}
	}
	if len(used) == 0 {
		return c, nil
	}
	slices.SortFunc(used, func(a, b grant.Grant) int { return strings.Compare(a.ClaimUID, b.ClaimUID) })
	var cl Claims
	for _, g := range used {
		if err := cl.Add(g, c.PodUID, c.podName()); err != nil {
			return c, err
		}
	}
	c, err := n.WithClaims(c, cl)
	if err != nil {
		return c, err
	}
	return c, CheckClaimsEPC(pod.Annotations, c.Name, cl)
}

// claimObject names the ResourceClaim of the pod's claim entry podClaim: its
// resourceClaimName, or the claim made from its template, as the pod's status names it.
func claimObject(pod *corev1.Pod, podClaim string) (string, bool) {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.Name != podClaim {
			continue
		}
		if pc.ResourceClaimName != nil {
			return *pc.ResourceClaimName, true
		}
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == podClaim && st.ResourceClaimName != nil {
				return *st.ResourceClaimName, true
			}
		}
	}
	return "", false
}
