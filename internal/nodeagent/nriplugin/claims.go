package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/epc"
)

// ClaimError refuses a container for one of the DRA claims its environment names (the
// marker grant.EnvName(UID) that the claim's CDI device sets).
type ClaimError struct {
	UID string // the claim's UID
	Err error
}

func (e *ClaimError) Error() string { return fmt.Sprintf("DRA claim %s: %v", e.UID, e.Err) }
func (e *ClaimError) Unwrap() error { return e.Err }

// claims is what the DRA claims of one container give it, summed over the claims.
type claims struct {
	uids      []string
	exclusive map[string]cpuset.CPUSet // by pool
	shared    map[string]int64         // millicpu by pool
	epcBytes  int64
	from      map[string]string // pool → the claim that gave it first, for errors
}

// requestWithClaims is requestOf plus the DRA claims the container's environment names
// (claimsOf): their exclusive CPUs become exact CPUs of their pools, their shares shared-pool
// requests. view is the pod as the extensions see it: pod itself, or a copy whose
// annotations carry the claims' SGX EPC as the container's limit (epcView).
func (a *Plugin) requestWithClaims(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, fetch bool) (
	c plan.Container, view *api.PodSandbox, err error) {
	c, err = a.requestOf(ctx, pod, ctr, fetch)
	if err != nil {
		return c, pod, err
	}
	cl, err := a.claimsOf(pod, ctr, fetch)
	if err != nil || len(cl.uids) == 0 {
		return c, pod, err
	}
	if c, err = a.withClaims(c, cl); err != nil {
		return c, pod, err
	}
	view, err = epcView(pod, ctr.GetName(), cl)
	return c, view, err
}

// claimsOf reads the grant of each claim ctr's environment names (from memory, or with read
// from the store, bounded: grants.go): a claim with no grant, or not reserved for pod, refuses
// the container. Nothing else of a grant is trusted here: its CPUs and shares go through the
// planner like any request (withClaims).
func (a *Plugin) claimsOf(pod *api.PodSandbox, ctr *api.Container, read bool) (claims, error) {
	uids, err := grant.ClaimsInEnv(ctr.GetEnv())
	if err != nil || len(uids) == 0 {
		return claims{}, err
	}
	cl := claims{uids: uids, exclusive: map[string]cpuset.CPUSet{}, shared: map[string]int64{}, from: map[string]string{}}
	for _, uid := range uids {
		if a.grants == nil {
			return cl, &ClaimError{UID: uid, Err: fmt.Errorf("environment variable %s names it, but this agent reads no DRA "+
				"grants (--dra-state-dir is empty)", grant.EnvName(uid))}
		}
		g, err := a.grants.get(uid, pod.GetUid(), read)
		if errors.Is(err, grant.ErrNotFound) {
			return cl, &ClaimError{UID: uid, Err: fmt.Errorf("no grant in %s: the DRA driver (podfence-dra) has not prepared "+
				"the claim on this node", a.grants.store.Dir)}
		}
		if err != nil {
			return cl, &ClaimError{UID: uid, Err: err}
		}
		if !g.UsedBy(pod.GetUid()) {
			return cl, &ClaimError{UID: uid, Err: fmt.Errorf("claim %s/%s is reserved for pods %s, not for pod %s (%s)",
				g.Namespace, g.Name, strings.Join(g.PodUIDs, ", "), podName(pod), pod.GetUid())}
		}
		if err := cl.add(g); err != nil {
			return cl, &ClaimError{UID: uid, Err: err}
		}
	}
	return cl, nil
}

// add sums one grant into cl; two claims giving one CPU is an error.
func (cl *claims) add(g grant.Grant) error {
	for _, pool := range slices.Sorted(maps.Keys(g.Exclusive)) {
		cpus, had := g.Exclusive[pool], cl.exclusive[pool]
		if both := had.Intersection(cpus); !both.IsEmpty() {
			return fmt.Errorf("exclusive pool %q: CPUs %s are also given by claim %s", pool, both, cl.from[pool])
		}
		cl.exclusive[pool] = had.Union(cpus)
		cl.note(pool, g.ClaimUID)
	}
	for _, pool := range slices.Sorted(maps.Keys(g.Shared)) {
		cl.shared[pool] += g.Shared[pool]
		cl.note(pool, g.ClaimUID)
	}
	cl.epcBytes += g.EPCBytes
	return nil
}

func (cl *claims) note(pool, uid string) {
	if _, ok := cl.from[pool]; !ok {
		cl.from[pool] = uid
	}
}

// withClaims adds cl to c: each pool must be a pool of this node that pods request through
// DRA (requestAPI: dra) and that c does not ask for otherwise; exclusive CPUs must be the
// pool's. Whether they are free is the planner's call (a CPU another container holds is
// refused there, whichever API gave it).
func (a *Plugin) withClaims(c plan.Container, cl claims) (plan.Container, error) {
	node := a.node.Load()
	req := make(plan.Request, len(c.Request)+len(cl.exclusive)+len(cl.shared))
	maps.Copy(req, c.Request)
	check := func(pool string, typ allocation.PoolType) error {
		p, ok := node.Pools.Pool(pool)
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
	for _, pool := range slices.Sorted(maps.Keys(cl.exclusive)) {
		cpus := cl.exclusive[pool]
		if err := check(pool, allocation.TypeExclusive); err != nil {
			return c, &ClaimError{UID: cl.from[pool], Err: err}
		}
		p, _ := node.Pools.Pool(pool)
		if out := cpus.Difference(p.CPUs.Union(node.Pools.Offline[pool])); !out.IsEmpty() {
			return c, &ClaimError{UID: cl.from[pool], Err: fmt.Errorf("gives CPUs %s, which are not in exclusive pool %q (%s)",
				out, pool, p.CPUs)}
		}
		req[pool] = *resource.NewQuantity(int64(node.Units(pool, cpus)), resource.DecimalSI)
		c.ExclusiveCPUs = c.ExclusiveCPUs.Union(cpus)
	}
	for _, pool := range slices.Sorted(maps.Keys(cl.shared)) {
		if err := check(pool, allocation.TypeShared); err != nil {
			return c, &ClaimError{UID: cl.from[pool], Err: err}
		}
		req[pool] = *resource.NewQuantity(cl.shared[pool], resource.DecimalSI)
	}
	c.Request = req
	return c, nil
}

// epcView returns pod as the extensions see it: with the claims' SGX EPC, if any, as the
// container's limit annotation (what the admission webhook writes for an sgx.intel.com/epc
// limit), which the EPC extension (package epc/enforce) applies as misc.max. A container
// whose limit annotation is set already is refused: one limit, one source.
func epcView(pod *api.PodSandbox, container string, cl claims) (*api.PodSandbox, error) {
	if cl.epcBytes <= 0 {
		return pod, nil
	}
	key := epc.AnnotationContainerPrefix + container
	if v, ok := pod.GetAnnotations()[key]; ok {
		return pod, &ClaimError{UID: strings.Join(cl.uids, ","), Err: fmt.Errorf("gives SGX EPC %d bytes, but annotation %s=%q "+
			"sets the container's limit too: ask for EPC through the claim or the resource sgx.intel.com/epc, not both",
			cl.epcBytes, key, v)}
	}
	view := proto.Clone(pod).(*api.PodSandbox)
	if view.Annotations == nil {
		view.Annotations = map[string]string{}
	}
	view.Annotations[key] = strconv.FormatInt(cl.epcBytes, 10)
	return view, nil
}

// epcViews returns pods as the extensions see them at Synchronize: each pod with a running
// container whose claims give SGX EPC carries that container's limit (epcView), so the EPC
// extension rebuilds its caps. A claim that no longer reads is left out (logged).
func (a *Plugin) epcViews(pods []*api.PodSandbox, ctrs []*api.Container) []*api.PodSandbox {
	byID := make(map[string]int, len(pods))
	for i, p := range pods {
		byID[p.GetId()] = i
	}
	var out []*api.PodSandbox
	for _, ctr := range ctrs {
		i, ok := byID[ctr.GetPodSandboxId()]
		if !ok || ctr.GetState() == api.ContainerState_CONTAINER_STOPPED || !hasClaimMarker(ctr) {
			continue
		}
		if out == nil {
			out = slices.Clone(pods)
		}
		cl, err := a.claimsOf(out[i], ctr, false)
		if err == nil {
			out[i], err = epcView(out[i], ctr.GetName(), cl)
		}
		if err != nil {
			a.log.Warn("running container's DRA claims unread: its SGX EPC limit is not tracked", "pod", podName(out[i]),
				"container", ctr.GetName(), "err", err)
		}
	}
	if out == nil {
		return pods
	}
	return out
}

// hasClaimMarker says whether ctr's environment names a DRA claim.
func hasClaimMarker(ctr *api.Container) bool {
	return slices.ContainsFunc(ctr.GetEnv(), func(e string) bool { return strings.HasPrefix(e, grant.EnvPrefix) })
}
