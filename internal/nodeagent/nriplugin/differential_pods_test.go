package nriplugin_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/admission"
	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/dra/grant"
	"github.com/podfence/podfence/internal/pinning"
)

// The random pods of TestPlanAgentDifferential.

// randomPod is pod i of a seed, with the grant of its DRA claim if it has one: up to two init
// containers (each a sidecar or not) and one to three app containers, each asking for a random
// mix of pools (under either domain now and then, a pool of the default type or a DRA pool
// too, which the webhook refuses), some with an SGX EPC limit, some using the pod's claim;
// now and then a process pinning annotation (podfence's or CPU-Pooler's key) naming some.
func (d *differ) randomPod(rng *rand.Rand, seed, i int) (*corev1.Pod, []grant.Grant) {
	name := fmt.Sprintf("p%d-%d", seed, i)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	g, hasClaim := d.randomGrant(rng, pod)
	n := 0
	ctr := func() corev1.Container {
		n++
		c := corev1.Container{Name: fmt.Sprintf("c%d", n), Resources: corev1.ResourceRequirements{Limits: d.randomPools(rng)}}
		if rng.IntN(4) == 0 {
			c.Resources.Limits[admission.ResourceEPC] = resource.MustParse("1Mi")
		}
		if hasClaim && rng.IntN(2) == 0 {
			c.Resources.Claims = []corev1.ResourceClaim{{Name: "cpus"}}
		}
		return c
	}
	for range rng.IntN(3) {
		c := ctr()
		if rng.IntN(2) == 0 {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for range 1 + rng.IntN(3) {
		pod.Spec.Containers = append(pod.Spec.Containers, ctr())
	}
	if rng.IntN(3) == 0 {
		key := pinning.Key
		if rng.IntN(2) == 0 {
			key = pinning.CPUPoolerKey
		}
		var entries []pinning.Container
		for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
			if rng.IntN(2) == 0 {
				entries = append(entries, pinning.Container{Name: c.Name, Processes: d.processes(rng, c)})
			}
		}
		if len(entries) > 0 {
			pod.Annotations = map[string]string{key: pinning.Encode(entries...)}
		}
	}
	if !hasClaim {
		return pod, nil
	}
	if rng.IntN(2) == 0 {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "cpus", ResourceClaimName: &g.Name}}
	} else {
		tmpl := "cpus-template"
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "cpus", ResourceClaimTemplateName: &tmpl}}
		pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "cpus", ResourceClaimName: &g.Name}}
	}
	return pod, []grant.Grant{g}
}

// randomGrant is, on a layout with DRA pools and now and then, a claim for pod: CPUs of a DRA
// exclusive pool (any of its CPUs: another pod's claim may give them too), a share of a DRA
// shared pool, SGX EPC, reserved for the pod (or, rarely, for another).
func (d *differ) randomGrant(rng *rand.Rand, pod *corev1.Pod) (grant.Grant, bool) {
	if len(d.layout.dra) == 0 || rng.IntN(2) == 0 {
		return grant.Grant{}, false
	}
	g := grant.Grant{ClaimUID: "claim-" + string(pod.UID), Namespace: pod.Namespace, Name: "claim-" + pod.Name,
		PodUIDs: []string{string(pod.UID)}}
	if rng.IntN(8) == 0 {
		g.PodUIDs = []string{"uid-someone-else"}
	}
	for _, name := range d.layout.dra {
		p, _ := d.node.Pools.Pool(name)
		switch {
		case rng.IntN(2) == 0:
		case p.Type == allocation.TypeExclusive:
			var cpus []int
			for _, c := range p.CPUs.List() {
				if rng.IntN(3) == 0 {
					cpus = append(cpus, c)
				}
			}
			if len(cpus) > 0 {
				g.Exclusive = map[string]cpuset.CPUSet{name: cpuset.New(cpus...)}
			}
		default:
			g.Shared = map[string]int64{name: int64(1 + rng.IntN(900))}
		}
	}
	if rng.IntN(3) == 0 || len(g.Exclusive)+len(g.Shared) == 0 {
		g.EPCBytes = 4096
	}
	return g, true
}

// randomPools is a random set of pool resources.
func (d *differ) randomPools(rng *rand.Rand) corev1.ResourceList {
	l := corev1.ResourceList{}
	set := func(domain, pool string, n int) {
		l[corev1.ResourceName(domain+"/"+pool)] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	pick := func() string { return d.layout.pools[rng.IntN(len(d.layout.pools))] }
	amount := func(pool string) int {
		if pools.TypeOf(pool) == allocation.TypeShared {
			return 1 + rng.IntN(1200)
		}
		return 1 + rng.IntN(4)
	}
	switch rng.IntN(10) {
	case 0:
	case 1, 2, 3:
		p := pick()
		set(d.layout.domain, p, amount(p))
	case 4:
		p, q := pick(), pick()
		set(d.layout.domain, p, amount(p))
		set(d.layout.domain, q, amount(q))
	case 5:
		p := pick()
		set([]string{pools.DefaultDomain, pools.CPUPoolerDomain}[rng.IntN(2)], p, amount(p))
	case 6:
		set(d.layout.domain, "default", 1)
	case 7:
		if len(d.layout.dra) > 0 {
			p := d.layout.dra[rng.IntN(len(d.layout.dra))]
			set(d.layout.domain, p, amount(p))
		}
	default:
		l[corev1.ResourceCPU] = resource.MustParse("500m")
	}
	return l
}

// processes is a pinning entry for c: one process per pool it asks for (its whole amount, or
// now and then one more), or one default-pool process.
func (d *differ) processes(rng *rand.Rand, c corev1.Container) []pinning.Process {
	var names []string
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var procs []pinning.Process
	for _, name := range names {
		pool, ok := pools.ParseResourceNameIn(name, pools.Domains(d.admit.Pools...))
		if !ok || pools.TypeOf(pool) == allocation.TypeDefault {
			continue
		}
		q := c.Resources.Limits[corev1.ResourceName(name)]
		n := int(q.Value()) + rng.IntN(4)/3
		procs = append(procs, pinning.Process{Path: "/bin/p" + strconv.Itoa(len(procs)), Pool: pool, CPUs: n})
	}
	if len(procs) == 0 {
		procs = []pinning.Process{{Path: "/bin/p", Pool: "default", CPUs: 1}}
	}
	return procs
}
