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
// UID: filled in the background from RunPodSandbox, or else at the pod's first container
// (devices are allocated when the kubelet admits the pod, before it makes its sandbox, and
// never change), dropped at RemovePodSandbox, refreshed from a List made before each
// connection (prelist) and pruned to the live pods at Synchronize.
type kubeletDevices struct {
	api     PodResources
	timeout time.Duration
	reads   sync.WaitGroup // prefetches in flight

	mu       sync.Mutex
	byUID    map[string]podresources.Pod
	inflight map[string]chan struct{} // pods being prefetched, closed when done
	listed   *kubeletList             // the List made before this connection, for its Synchronize
}

// kubeletList is the outcome of one List.
type kubeletList struct {
	pods map[podresources.Ref]podresources.Pod
	err  error
}

func newKubeletDevices(api PodResources, timeout time.Duration) *kubeletDevices {
	if api == nil {
		return nil
	}
	if timeout <= 0 {
		timeout = DefaultPodResourcesTimeout
	}
	return &kubeletDevices{api: api, timeout: timeout, byUID: map[string]podresources.Pod{}, inflight: map[string]chan struct{}{}}
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
// from the kubelet, waiting for a prefetch of the pod in flight first; within k.timeout in
// all. A pod the kubelet does not have has no devices.
func (k *kubeletDevices) devices(ctx context.Context, pod *api.PodSandbox, container string, fetch bool) (podresources.Devices, error) {
	uid := pod.GetUid()
	k.mu.Lock()
	d, ok := k.byUID[uid][container]
	inflight := k.inflight[uid]
	k.mu.Unlock()
	if ok || !fetch {
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	if inflight != nil {
		select {
		case <-inflight:
		case <-ctx.Done():
			return nil, fmt.Errorf("the kubelet did not answer the read of its pod (from RunPodSandbox) in time: %w", ctx.Err())
		}
		k.mu.Lock()
		d, ok = k.byUID[uid][container]
		k.mu.Unlock()
		if ok {
			return d, nil
		}
	}
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

// prefetch starts reading the devices of a new pod without a pool request annotation at
// RunPodSandbox (the kubelet allocated them when it admitted the pod, before it made the
// sandbox), so that CreateContainer finds them in the cache. It does not wait for the
// kubelet: the read runs in the background, bounded as devices is; a failure goes to failed
// (for the log only), and CreateContainer asks again. Safe on a nil k.
func (k *kubeletDevices) prefetch(pod *api.PodSandbox, failed func(error)) {
	if k == nil {
		return
	}
	if _, annotated := pod.GetAnnotations()[podapi.AnnotationCPUPools]; annotated {
		return
	}
	uid := pod.GetUid()
	k.mu.Lock()
	_, known := k.byUID[uid]
	_, reading := k.inflight[uid]
	if known || reading { // a re-created sandbox
		k.mu.Unlock()
		return
	}
	done := make(chan struct{})
	k.inflight[uid] = done
	k.mu.Unlock()
	k.reads.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
		defer cancel()
		p, err := k.api.Pod(ctx, podresources.Ref{Namespace: pod.GetNamespace(), Name: pod.GetName()}, "")
		if err == nil {
			k.put(uid, p)
		}
		k.mu.Lock()
		delete(k.inflight, uid)
		k.mu.Unlock()
		close(done)
		if err != nil {
			failed(err)
		}
	})
}

// wait waits for the prefetches in flight. Safe on a nil k.
func (k *kubeletDevices) wait() {
	if k != nil {
		k.reads.Wait()
	}
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

// prelist reads every pod's devices with one List, bounded, for the next Synchronize (Run
// calls it before each connection: a Synchronize must not wait for the kubelet). Safe on a
// nil k.
func (k *kubeletDevices) prelist(ctx context.Context) {
	if k == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncPodResourcesTimeout)
	list, err := k.api.List(ctx)
	cancel()
	k.mu.Lock()
	k.listed = &kubeletList{pods: list, err: err}
	k.mu.Unlock()
}

// refresh keeps the devices of pods (the live ones) without a pool request annotation,
// from the List made before this connection where it has them, else from the cache; the
// cache keeps no other pod. It returns the List's error if a pod needed it. It does not call
// the kubelet. Safe on a nil k.
func (k *kubeletDevices) refresh(pods []*api.PodSandbox) error {
	if k == nil {
		return nil
	}
	var need []*api.PodSandbox
	for _, p := range pods {
		if _, annotated := p.GetAnnotations()[podapi.AnnotationCPUPools]; !annotated {
			need = append(need, p)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	listed := k.listed
	k.listed = nil
	old := k.byUID
	k.byUID = make(map[string]podresources.Pod, len(need))
	for _, p := range need {
		if listed != nil && listed.err == nil {
			if d, ok := listed.pods[podresources.Ref{Namespace: p.GetNamespace(), Name: p.GetName()}]; ok {
				k.byUID[p.GetUid()] = d
				continue
			}
		}
		if d, ok := old[p.GetUid()]; ok {
			k.byUID[p.GetUid()] = d
		}
	}
	if listed != nil && listed.err != nil && len(need) > 0 {
		return fmt.Errorf("kubelet pod resources: %w", listed.err)
	}
	return nil
}
