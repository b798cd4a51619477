package nriplugin

import (
	"errors"
	"fmt"
	"slices"
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
// exclusive pools that hold them (by pool, podfence.io/exclusive-cpus.<pool>, when the
// container has those); a pool request may add a shared-pool share beside them. A container
// the process pinning annotation names is Pinned, with its Processes (plan.PinningOf).
func (a *Plugin) containerOf(pod *api.PodSandbox, ctr *api.Container) (plan.Container, error) {
	c := plan.Container{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(), Name: ctr.GetName()}
	var err error
	if c.Processes, c.Pinned, err = plan.PinningOf(c.Name, pod.GetAnnotations(), ctr.GetAnnotations()); err != nil {
		return c, err
	}
	v, ok := pod.GetAnnotations()[podapi.AnnotationCPUPools]
	if !ok {
		v, ok = ctr.GetAnnotations()[podapi.AnnotationCPUPools]
	}
	if ok {
		byCtr, err := a.poolReqs.parse(v, c.Name) // podapi.ParseCPUPoolsFor, memoized
		if err != nil {
			return c, err
		}
		c.Request = byCtr[c.Name]
	}
	key, v, cpus, err := givenCPUs(ctr.GetAnnotations())
	if err != nil || key == "" {
		return c, err
	}
	node := a.node.Load()
	held, err := exclusivePoolsOf(node, cpus)
	if err != nil {
		return c, &podapi.AnnotationError{Key: key, Value: v, Err: err}
	}
	req := plan.Request{}
	asked := false
	for name, q := range c.Request {
		req[name] = q
		asked = asked || pools.TypeOf(name) == allocation.TypeExclusive
	}
	for _, pool := range held {
		if _, ok := req[pool]; ok {
			continue
		}
		if asked {
			return c, &podapi.AnnotationError{Key: key, Value: v, Err: fmt.Errorf(
				"CPUs %s are in pool %q, but annotation %s does not ask pool %q for this container: "+
					"the device plugin and the pool request must name the same exclusive pools", cpus, pool, podapi.AnnotationCPUPools, pool)}
		}
		req[pool] = *resource.NewQuantity(int64(node.Units(pool, cpus)), resource.DecimalSI)
	}
	c.Request, c.ExclusiveCPUs = req, cpus
	return c, nil
}

// givenCPUs reads the device plugin's CPUs from a container's annotations: the union of the
// per-pool annotations podfence.io/exclusive-cpus.<pool> when there are any (key names the
// first), else podfence.io/exclusive-cpus; key is "" when there is neither.
func givenCPUs(annotations map[string]string) (key, value string, cpus cpuset.CPUSet, err error) {
	perPool := podapi.AnnotationExclusiveCPUs + "."
	cpus = cpuset.New()
	var keys []string
	for k := range annotations {
		if strings.HasPrefix(k, perPool) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		if v, ok := annotations[podapi.AnnotationExclusiveCPUs]; ok {
			keys = []string{podapi.AnnotationExclusiveCPUs}
			value = v
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		set, err := podapi.ParseExclusiveCPUs(annotations[k])
		if err != nil {
			var ae *podapi.AnnotationError
			if errors.As(err, &ae) {
				ae.Key = k
			}
			return k, annotations[k], cpus, err
		}
		cpus = cpus.Union(set)
	}
	if len(keys) == 0 {
		return "", "", cpus, nil
	}
	if value == "" {
		value = cpus.String()
	}
	return keys[0], value, cpus, nil
}

// exclusivePoolsOf returns the exclusive pools that hold cpus, sorted; every CPU must be in one.
func exclusivePoolsOf(node *plan.Node, cpus cpuset.CPUSet) ([]string, error) {
	var names, all []string
	rest := cpus
	for _, p := range node.Pools.Pools {
		if p.Type != allocation.TypeExclusive {
			continue
		}
		all = append(all, fmt.Sprintf("%s (%s)", p.Name, p.CPUs))
		if in := rest.Intersection(p.CPUs); !in.IsEmpty() {
			names, rest = append(names, p.Name), rest.Difference(in)
		}
	}
	switch {
	case len(all) == 0:
		return nil, fmt.Errorf("this node has no exclusive pool")
	case !rest.IsEmpty():
		return nil, fmt.Errorf("CPUs %s are in no exclusive pool; want CPUs of %s", rest, strings.Join(all, ", "))
	}
	return names, nil
}
