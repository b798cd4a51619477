package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/podapi"
)

// Request is what one container asks of the pools (podapi.Request): pool name → amount.
type Request = podapi.Request

// ContainerRequests reads the pool requests of every container of a pod from its resources
// (`<domain>/<pool>`, domain podfence.io or nokia.k8s.io). Init containers are included. A
// resource set in both requests and limits must have the same value there. A pool of the
// default type is left out, as CPU-Pooler leaves it: the container runs on the default pool.
func ContainerRequests(pod *corev1.Pod) (map[string]Request, error) {
	return ContainerRequestsIn(pod, pools.Domains())
}

// ContainerRequestsIn is ContainerRequests for resource names under domains (pools.Domains
// of the pool configs, with their resourceBaseName).
func ContainerRequestsIn(pod *corev1.Pod, domains []string) (map[string]Request, error) {
	out := map[string]Request{}
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		r, err := requestOf(c, domains)
		if err != nil {
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		}
		out[c.Name] = r
	}
	return out, nil
}

func requestOf(c corev1.Container, domains []string) (Request, error) {
	r := Request{}
	names := map[corev1.ResourceName]bool{}
	for n := range c.Resources.Limits {
		names[n] = true
	}
	for n := range c.Resources.Requests {
		names[n] = true
	}
	for n := range names {
		pool, ok := pools.ParseResourceNameIn(string(n), domains)
		if !ok || pools.TypeOf(pool) == allocation.TypeDefault {
			continue
		}
		lim, hasLim := c.Resources.Limits[n]
		req, hasReq := c.Resources.Requests[n]
		q := lim
		switch {
		case hasLim && hasReq && lim.Cmp(req) != 0:
			return nil, fmt.Errorf("resource %s: requests %s differ from limits %s: extended resources need requests equal to limits", n,
				req.String(), lim.String())
		case !hasLim:
			q = req
		}
		if prev, dup := r[pool]; dup && prev.Cmp(q) != 0 {
			return nil, fmt.Errorf("resource %s: pool %q is requested twice under different domains (%s and %s)", n, pool, prev.String(), q.String())
		}
		r[pool] = q
	}
	return r, nil
}
