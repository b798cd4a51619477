package nriplugin

import (
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/podapi"
)

// keyOf names a container of a pod in the planner's state.
func keyOf(pod *api.PodSandbox, ctr *api.Container) allocation.Key {
	return allocation.Key{PodUID: pod.GetUid(), Container: ctr.GetName()}
}

// containerOf reads what ctr asks for from its annotations (see podapi.AnnotationExclusiveCPUs and
// podapi.AnnotationCPUPools). The pool request comes from the pod's annotations, or from the
// container's when the runtime copied it there. Exact CPUs from the device plugin select the
// exclusive pool that holds them; a pool request may add a shared-pool share beside them.
func (a *Plugin) containerOf(pod *api.PodSandbox, ctr *api.Container) (plan.Container, error) {
	c := plan.Container{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Name: ctr.GetName()}
	v, ok := pod.GetAnnotations()[podapi.AnnotationCPUPools]
	if !ok {
		v, ok = ctr.GetAnnotations()[podapi.AnnotationCPUPools]
	}
	if ok {
		byCtr, err := podapi.ParseCPUPoolsFor(v, c.Name)
		if err != nil {
			return c, err
		}
		c.Request = byCtr[c.Name]
	}
	v, ok = ctr.GetAnnotations()[podapi.AnnotationExclusiveCPUs]
	if !ok {
		return c, nil
	}
	cpus, err := podapi.ParseExclusiveCPUs(v)
	if err != nil {
		return c, err
	}
	pool, err := a.exclusivePoolOf(cpus)
	if err != nil {
		return c, &podapi.AnnotationError{Key: podapi.AnnotationExclusiveCPUs, Value: v, Err: err}
	}
	req := plan.Request{}
	for name, q := range c.Request {
		if pools.TypeOf(name) == allocation.TypeExclusive && name != pool {
			return c, &podapi.AnnotationError{Key: podapi.AnnotationExclusiveCPUs, Value: v, Err: fmt.Errorf(
				"CPUs %s are in pool %q, but annotation %s asks pool %q for this container: "+
					"the device plugin and the pool request must name the same exclusive pool", cpus, pool, podapi.AnnotationCPUPools, name)}
		}
		req[name] = q
	}
	if _, ok := req[pool]; !ok {
		req[pool] = *resource.NewQuantity(int64(cpus.Size()), resource.DecimalSI)
	}
	c.Request, c.ExclusiveCPUs = req, cpus
	return c, nil
}

// exclusivePoolOf returns the exclusive pool that holds every CPU of cpus.
func (a *Plugin) exclusivePoolOf(cpus cpuset.CPUSet) (string, error) {
	var names []string
	for _, p := range a.node.Load().Pools.Pools {
		if p.Type != allocation.TypeExclusive {
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s)", p.Name, p.CPUs))
		if cpus.IsSubsetOf(p.CPUs) {
			return p.Name, nil
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("this node has no exclusive pool")
	}
	return "", fmt.Errorf("CPUs %s are not all in one exclusive pool; want CPUs of one of %s", cpus, strings.Join(names, ", "))
}
