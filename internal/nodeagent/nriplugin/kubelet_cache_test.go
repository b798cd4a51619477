package nriplugin_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"

	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest"
	"github.com/podfence/podfence/internal/testwait"
)

// countingKubelet is the kubelet's pod resources API answering from memory, counting the
// calls it gets; fail makes every call fail.
type countingKubelet struct {
	mu    sync.Mutex
	calls int
	fail  error
}

func (k *countingKubelet) Pod(_ context.Context, ref podresources.Ref, container string) (podresources.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	if k.fail != nil {
		return nil, k.fail
	}
	return podresources.Pod{"app": podresources.Devices{}}, nil
}

func (k *countingKubelet) List(context.Context) (map[podresources.Ref]podresources.Pod, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	if k.fail != nil {
		return nil, k.fail
	}
	return map[podresources.Ref]podresources.Pod{}, nil
}

func (k *countingKubelet) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

// TestKubeletAskedOncePerPod: a pod's devices are read from the kubelet once, from
// RunPodSandbox, and its containers find them there even after other pods started; a
// failure to read them is logged, and a failing List before a connection too, at its
// Synchronize.
func TestKubeletAskedOncePerPod(t *testing.T) {
	kubelet := &countingKubelet{}
	var rn node
	rn.pod("running", nil)
	a, lb := syncedLog(t, newNode(t, testTopology, kubeletPools), nritest.NoCheckpoint{}, &rn,
		nriplugin.Options{PodResources: kubelet})
	if got := lb.lines("rebuilt without their kubelet devices"); len(got) != 0 {
		t.Errorf("a List that worked logged %q", got)
	}
	first, second := rn.pod("first", nil), rn.pod("second", nil)
	base := kubelet.count()
	for _, p := range []*api.PodSandbox{first, second} {
		if err := a.RunPodSandbox(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil { // the reads RunPodSandbox started in the background
		t.Fatal(err)
	}
	if _, err := createOn(t, a, first, "c1", "app", nil); err != nil {
		t.Fatal(err)
	}
	if n := kubelet.count() - base; n != 2 {
		t.Errorf("the kubelet was asked %d times for two pods and a container; want 2", n)
	}
	if got := lb.lines("kubelet pod resources not read at RunPodSandbox"); len(got) != 0 {
		t.Errorf("reads that worked logged %q", got)
	}

	kubelet.mu.Lock()
	kubelet.fail = errors.New("kubelet down")
	kubelet.mu.Unlock()
	if err := a.RunPodSandbox(t.Context(), rn.pod("third", nil)); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil { // the read RunPodSandbox started in the background
		t.Fatal(err)
	}
	if got := lb.lines("kubelet pod resources not read at RunPodSandbox", "kubelet down"); len(got) != 1 {
		t.Errorf("a failed read logged %q; want one line", got)
	}
	ctx, cancel := context.WithDeadline(t.Context(), testwait.Deadline(t))
	defer cancel()
	a.Prepare(ctx) // the List before a connection, as Run makes it
	if _, err := a.Synchronize(ctx, rn.pods, rn.ctrs); err != nil {
		t.Fatal(err)
	}
	if got := lb.lines("rebuilt without their kubelet devices", "kubelet down"); len(got) != 1 {
		t.Errorf("a failed List logged %q; want one line", got)
	}
}

// TestKubeletCacheBound: the cache of pods' devices holds at most 4096 pods; the next new
// pod empties it (its containers ask the kubelet again), the 4096th does not.
func TestKubeletCacheBound(t *testing.T) {
	kubelet := &countingKubelet{}
	a := nriplugin.New(newNode(t, testTopology, kubeletPools), nritest.NoCheckpoint{},
		slog.New(slog.DiscardHandler), nriplugin.Options{PodResources: kubelet})
	t.Cleanup(func() { _ = a.Close() })
	if _, err := a.Synchronize(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	var pods []*api.PodSandbox
	run := func() *api.PodSandbox {
		t.Helper()
		id := "sb-" + strconv.Itoa(len(pods))
		p := &api.PodSandbox{Id: id, Uid: "uid-" + id, Namespace: "ns", Name: id}
		pods = append(pods, p)
		if err := a.RunPodSandbox(t.Context(), p); err != nil {
			t.Fatal(err)
		}
		if err := a.Flush(); err != nil { // the read RunPodSandbox started in the background
			t.Fatal(err)
		}
		return p
	}
	for range 4096 {
		run()
	}
	asks := func(p *api.PodSandbox, id string) int {
		t.Helper()
		before := kubelet.count()
		if _, err := createOn(t, a, p, id, "app", nil); err != nil {
			t.Fatal(err)
		}
		return kubelet.count() - before
	}
	if n := asks(pods[0], "c0"); n != 0 {
		t.Errorf("with 4096 pods cached, the first one's container asked the kubelet %d times", n)
	}
	last := run()
	if n := asks(last, "c1"); n != 0 {
		t.Errorf("the 4097th pod's container asked the kubelet %d times", n)
	}
	if n := asks(pods[1], "c2"); n != 1 {
		t.Errorf("after the 4097th pod, an earlier pod's container asked the kubelet %d times; want 1 (the cache was emptied)", n)
	}
}
