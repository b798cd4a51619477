package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/epc"
)

// ClaimError refuses a container for one of the DRA claims its environment names (the
// marker grant.EnvName(UID) that the claim's CDI device sets).
type ClaimError = plan.ClaimError

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
	if err != nil || len(cl.UIDs) == 0 {
		return c, pod, err
	}
	if c, err = a.node.Load().WithClaims(c, cl); err != nil {
		return c, pod, err
	}
	view, err = epcView(pod, ctr.GetName(), cl)
	return c, view, err
}

// claimsOf reads the grant of each claim ctr's environment names (from memory, or with read
// from the store, bounded: grants.go): a claim with no grant, or not reserved for pod, refuses
// the container (plan.Claims.Add).
func (a *Plugin) claimsOf(pod *api.PodSandbox, ctr *api.Container, read bool) (plan.Claims, error) {
	var cl plan.Claims
	uids, err := grant.ClaimsInEnv(ctr.GetEnv())
	if err != nil || len(uids) == 0 {
		return cl, err
	}
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
		if err := cl.Add(g, pod.GetUid(), podName(pod)); err != nil {
			return cl, err
		}
	}
	return cl, nil
}

// epcView returns pod as the extensions see it: with the claims' SGX EPC, if any, as the
// container's limit annotation (what the admission webhook writes for an sgx.intel.com/epc
// limit), which the EPC extension (package epc/enforce) applies as misc.max. A container
// whose limit annotation is set already is refused (plan.CheckClaimsEPC).
func epcView(pod *api.PodSandbox, container string, cl plan.Claims) (*api.PodSandbox, error) {
	if cl.EPCBytes <= 0 {
		return pod, nil
	}
	if err := plan.CheckClaimsEPC(pod.GetAnnotations(), container, cl); err != nil {
		return pod, err
	}
	view := proto.Clone(pod).(*api.PodSandbox)
	if view.Annotations == nil {
		view.Annotations = map[string]string{}
	}
	view.Annotations[epc.AnnotationContainerPrefix+container] = strconv.FormatInt(cl.EPCBytes, 10)
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
