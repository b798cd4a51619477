package nriplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/pools"
	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/podapi"
)

// PodResources is the kubelet's record of the devices it allocated to containers;
// *podresources.Client is one.
type PodResources interface {
	Pod(ctx context.Context, ref podresources.Ref, container string) (podresources.Pod, error)
	List(ctx context.Context) (map[podresources.Ref]podresources.Pod, error)
}

// DefaultPodResourcesTimeout bounds CreateContainer's call of the kubelet's pod resources.
const DefaultPodResourcesTimeout = 100 * time.Millisecond

const (
	syncPodResourcesTimeout = time.Second // bounds Synchronize's List
	maxCachedPods           = 4096        // bounds the cache; a node runs a few hundred pods
)

// kubeletDevices is the kubelet's pod resources API and a cache of the devices of pods by
// UID: filled at RunPodSandbox, or else at the pod's first container (devices are allocated
// when the kubelet admits the pod, before it makes its sandbox, and never change), dropped
// at RemovePodSandbox, refreshed and pruned to the live pods at Synchronize.
type kubeletDevices struct {
	api     PodResources
	timeout time.Duration

	mu    sync.Mutex
	byUID map[string]podresources.Pod
}

func newKubeletDevices(api PodResources, timeout time.Duration) *kubeletDevices {
	if api == nil {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultPodResourcesTimeout
	}
	return &kubeletDevices{api: api, timeout: timeout, byUID: map[string]podresources.Pod{}}
}

// requestOf is what ctr asks for: its annotations (containerOf) and, when its pod carries no
// podfence.io/cpu-pools annotation (a pod admitted before podfence, or without the webhook),
// the pools of the devices the kubelet allocated to it (poolDevices). fetch false reads the
// cache only (Synchronize).
//
// The kubelet is asked with a bound (Options.PodResourcesTimeout). When it does not answer
// in time, or fails, the container is refused if its environment shows CPU pool devices the
// annotations do not cover (EXCLUSIVE_CPUS without podfence.io/exclusive-cpus, or
// SHARED_CPUS: what a pool device plugin's Allocate sets), so that the kubelet creates it
// again later rather than it running outside its pool; any other container is placed by its
// annotations alone (the default pool, for most), and a warning is logged.
func (a *Plugin) requestOf(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, fetch bool) (plan.Container, error) {
	c, err := a.containerOf(pod, ctr)
	if err != nil || a.kubelet == nil || hasPoolRequest(pod, ctr) {
		return c, err
	}
	devs, err := a.kubelet.devices(ctx, pod, ctr.GetName(), fetch)
	if err != nil {
		if v := poolEnv(ctr, c); v != "" {
			return c, fmt.Errorf("read the container's CPU pool devices from the kubelet: %w (its environment has %s, as a CPU pool "+
				"device plugin sets it: refused, so that the kubelet creates it again)", err, v)
		}
		a.log.Warn("kubelet pod resources unread: placing the container by its annotations alone", "pod", podName(pod),
			"container", ctr.GetName(), "err", err)
		return c, nil
	}
	req, exact, err := poolDevices(devs, pools.Domains(a.node.Load().Pools.Config))
	if err != nil {
		return c, err
	}
	return withDevices(c, req, exact), nil
}

// hasPoolRequest says whether the pod (or, where the runtime copied it, the container)
// carries the podfence.io/cpu-pools annotation.
func hasPoolRequest(pod *api.PodSandbox, ctr *api.Container) bool {
	_, ok := pod.GetAnnotations()[podapi.AnnotationCPUPools]
	if !ok {
		_, ok = ctr.GetAnnotations()[podapi.AnnotationCPUPools]
	}
	return ok
}

// poolEnv names the CPU pool variable in ctr's environment that c does not account for, or "".
func poolEnv(ctr *api.Container, c plan.Container) string {
	for _, e := range ctr.GetEnv() {
		name, _, _ := strings.Cut(e, "=")
		if name == plan.EnvSharedCPUs || name == plan.EnvExclusiveCPUs && c.ExclusiveCPUs.IsEmpty() {
			return name
		}
	}
	return ""
}

// devices returns the kubelet's devices of container in pod: from the cache, else (fetch)
// from the kubelet within k.timeout. A pod the kubelet does not have has no devices.
func (k *kubeletDevices) devices(ctx context.Context, pod *api.PodSandbox, container string, fetch bool) (podresources.Devices, error) {
	uid := pod.GetUid()
	k.mu.Lock()
	d, ok := k.byUID[uid][container]
	k.mu.Unlock()
	if ok || !fetch {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	p, err := k.api.Pod(ctx, podresources.Ref{Namespace: pod.GetNamespace(), Name: pod.GetName()}, container)
	if errors.Is(err, podresources.ErrNoPod) {
		p, err = podresources.Pod{}, nil
	}
	if err != nil {
		return nil, err
	}
	if _, ok := p[container]; !ok {
		p[container] = podresources.Devices{}
	}
	k.put(uid, p)
	return p[container], nil
}

// prefetch reads the devices of a new pod without a pool request annotation at
// RunPodSandbox (the kubelet allocated them when it admitted the pod, before it made the
// sandbox), so that CreateContainer finds them in the cache. Bounded as devices is; a
// failure is returned for the log only, and CreateContainer asks again. Safe on a nil k.
func (k *kubeletDevices) prefetch(ctx context.Context, pod *api.PodSandbox) error {
	if k == nil {
		return nil
	}
	if _, annotated := pod.GetAnnotations()[podapi.AnnotationCPUPools]; annotated {
		return nil
	}
	k.mu.Lock()
	_, known := k.byUID[pod.GetUid()]
	k.mu.Unlock()
	if known { // a re-created sandbox
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	p, err := k.api.Pod(ctx, podresources.Ref{Namespace: pod.GetNamespace(), Name: pod.GetName()}, "")
	if err != nil {
		return err
	}
	k.put(pod.GetUid(), p)
	return nil
}

// put caches a pod's devices.
func (k *kubeletDevices) put(uid string, p podresources.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.byUID[uid]; !ok && len(k.byUID) >= maxCachedPods {
		clear(k.byUID) // only if RemovePodSandbox went missing for thousands of pods
	}
	k.byUID[uid] = p
}

// drop forgets a pod (RemovePodSandbox). Safe on a nil k.
func (k *kubeletDevices) drop(uid string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.byUID, uid)
}

// refresh reads every pod's devices with one List (none when every pod carries a pool
// request annotation) and keeps those of pods (the live ones) without it; the cache keeps no
// other pod. Safe on a nil k.
func (k *kubeletDevices) refresh(ctx context.Context, pods []*api.PodSandbox) error {
	if k == nil {
		return nil
	}
	var need []*api.PodSandbox
	for _, p := range pods {
		if _, annotated := p.GetAnnotations()[podapi.AnnotationCPUPools]; !annotated {
			need = append(need, p)
		}
	}
	var list map[podresources.Ref]podresources.Pod
	var err error
	if len(need) > 0 {
		ctx, cancel := context.WithTimeout(ctx, syncPodResourcesTimeout)
		list, err = k.api.List(ctx)
		cancel()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	old := k.byUID
	k.byUID = make(map[string]podresources.Pod, len(need))
	for _, p := range need {
		if err == nil {
			k.byUID[p.GetUid()] = list[podresources.Ref{Namespace: p.GetNamespace(), Name: p.GetName()}]
		} else if d, ok := old[p.GetUid()]; ok {
			k.byUID[p.GetUid()] = d
		}
	}
	if err != nil {
		return fmt.Errorf("kubelet pod resources: %w", err)
	}
	return nil
}
