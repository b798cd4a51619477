package podresources_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podfence/podfence/internal/kube/podresources"
	"github.com/podfence/podfence/internal/kube/podresources/podresourcestest"
	"github.com/podfence/podfence/internal/testwait"
)

func start(t *testing.T) (*podresourcestest.Server, *podresources.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv := podresourcestest.Start(t, filepath.Join(dir, "kubelet.sock"))
	srv.SetPod("ns", "web", map[string]map[string][]string{
		"app":  {"podfence.io/exclusive_a": {"4", "5"}, "podfence.io/shared_s": {"shared_s-0", "shared_s-1"}, "gpu.example/g": {"g0"}},
		"side": nil,
		"init": {"podfence.io/shared_s": {"shared_s-7"}},
	})
	c, err := podresources.Dial(srv.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

var webPod = podresources.Pod{
	"app":  {"podfence.io/exclusive_a": {"4", "5"}, "podfence.io/shared_s": {"shared_s-0", "shared_s-1"}, "gpu.example/g": {"g0"}},
	"side": {},
	"init": {"podfence.io/shared_s": {"shared_s-7"}},
}

// TestPodByGet: one Get for one pod, every container's devices by resource.
func TestPodByGet(t *testing.T) {
	srv, c := start(t)
	p, err := c.Pod(context.Background(), podresources.Ref{Namespace: "ns", Name: "web"}, "app")
	if err != nil || !reflect.DeepEqual(p, webPod) {
		t.Fatalf("Pod = %v, %v; want %v", p, err, webPod)
	}
	if gets, lists := srv.Calls(); gets != 1 || lists != 0 {
		t.Errorf("%d Gets, %d Lists; want 1 Get", gets, lists)
	}
}

// TestPodGetDisabled: a kubelet with Get off is asked with List, and not with Get again.
func TestPodGetDisabled(t *testing.T) {
	srv, c := start(t)
	srv.DisableGet()
	for range 2 {
		p, err := c.Pod(context.Background(), podresources.Ref{Namespace: "ns", Name: "web"}, "app")
		if err != nil || !reflect.DeepEqual(p, webPod) {
			t.Fatalf("Pod = %v, %v", p, err)
		}
	}
	if gets, lists := srv.Calls(); gets != 1 || lists != 2 {
		t.Errorf("%d Gets, %d Lists; want 1 Get (refused), then Lists", gets, lists)
	}
}

// TestPodInitContainerLeftOutOfGet: a container Get's answer lacks is looked up with List.
func TestPodInitContainerLeftOutOfGet(t *testing.T) {
	srv, c := start(t)
	srv.OmitFromGet("init")
	p, err := c.Pod(context.Background(), podresources.Ref{Namespace: "ns", Name: "web"}, "init")
	if err != nil || !reflect.DeepEqual(p["init"], webPod["init"]) {
		t.Fatalf("Pod = %v, %v", p, err)
	}
	if gets, lists := srv.Calls(); gets != 1 || lists != 1 {
		t.Errorf("%d Gets, %d Lists; want 1 of each", gets, lists)
	}
}

// TestPodUnknown: a pod the kubelet does not have is ErrNoPod.
func TestPodUnknown(t *testing.T) {
	_, c := start(t)
	_, err := c.Pod(context.Background(), podresources.Ref{Namespace: "ns", Name: "gone"}, "app")
	if !errors.Is(err, podresources.ErrNoPod) || err.Error() != "pod ns/gone: the kubelet has no such pod" {
		t.Errorf("Pod of an unknown pod: %v", err)
	}
}

// TestPodBounded: a kubelet that does not answer fails the call when the caller's context
// ends, and it is not then asked with List. The context ends once the kubelet has the
// call (a deadline of a few milliseconds could pass before the call is even sent on a
// loaded machine); its end is a cancel, which the client treats as a deadline.
func TestPodBounded(t *testing.T) {
	srv, c := start(t)
	srv.Block()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := c.Pod(ctx, podresources.Ref{Namespace: "ns", Name: "web"}, "app")
		errs <- err
	}()
	testwait.Eventually(t, "the kubelet to have the Get", func() bool { gets, _ := srv.Calls(); return gets == 1 })
	cancel()
	if err := testwait.Receive(t, errs, "Pod to return"); status.Code(err) != codes.Canceled {
		t.Errorf("Pod from a silent kubelet: %v; want Canceled", err)
	}
	if gets, lists := srv.Calls(); gets != 1 || lists != 0 {
		t.Errorf("%d Gets, %d Lists; want the Get alone", gets, lists)
	}
}

// TestNoKubelet: without a socket, Dial works and calls fail as Unavailable.
func TestNoKubelet(t *testing.T) {
	c, err := podresources.Dial(filepath.Join(t.TempDir(), "none.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Pod(context.Background(), podresources.Ref{Namespace: "ns", Name: "web"}, "app"); status.Code(err) != codes.Unavailable {
		t.Errorf("Pod without a kubelet: %v; want Unavailable", err)
	}
}
