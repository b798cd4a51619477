package nodeinfo_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podfence/podfence/nodeinfo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestMergePatch(t *testing.T) {
	for _, tc := range []struct {
		info nodeinfo.Info
		want string
	}{
		{nodeinfo.Info{CoreSched: true, PhysicalCores: 16}, `{"metadata":{"annotations":{"podfence.io/physical-cores":"16"},"labels":{"podfence.io/core-sched":"supported"}}}`},
		{nodeinfo.Info{}, `{"metadata":{"labels":{"podfence.io/core-sched":"unsupported"}}}`},
	} {
		if got := string(nodeinfo.MergePatch(tc.info)); got != tc.want {
			t.Errorf("MergePatch(%+v) = %s, want %s", tc.info, got, tc.want)
		}
	}
}

func TestRead(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	if _, ok, err := nodeinfo.Read(n); ok || err != nil {
		t.Errorf("unlabelled: published %t, %v", ok, err)
	}
	n.Labels = map[string]string{nodeinfo.LabelCoreSched: "supported"}
	n.Annotations = map[string]string{nodeinfo.AnnotationPhysicalCores: "many"}
	info, ok, err := nodeinfo.Read(n)
	if want := `node a: annotation podfence.io/physical-cores="many": want a non-negative integer`; !ok || !info.CoreSched || err == nil || err.Error() != want {
		t.Errorf("Read = %+v, %t, %v; want supported, error %q", info, ok, err, want)
	}
}

// TestPublisher: the first patch fails and is retried; a change of Info is published; the
// node ends with the label and annotation.
func TestPublisher(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"keep": "me"}}})
	var patches atomic.Int32
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			return true, nil, errors.New("apiserver down")
		}
		return false, nil, nil // on to the tracker
	})
	var supported atomic.Bool
	p := &nodeinfo.Publisher{Client: client, Node: "n1", Every: 5 * time.Millisecond, Retry: time.Millisecond,
		Info: func() nodeinfo.Info { return nodeinfo.Info{CoreSched: supported.Load(), PhysicalCores: 4} },
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	node := func() *corev1.Node {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	wait := func(what, label string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); node().Labels[nodeinfo.LabelCoreSched] != label; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("the retried patch", "unsupported")
	supported.Store(true)
	wait("the change", "supported")
	n := node()
	if n.Annotations[nodeinfo.AnnotationPhysicalCores] != "4" || n.Labels["keep"] != "me" {
		t.Errorf("node = %v %v, want the core count and the other labels kept", n.Labels, n.Annotations)
	}
	time.Sleep(30 * time.Millisecond) // a few periods without a change
	if got := patches.Load(); got != 3 {
		t.Errorf("%d patches, want 3 (failed, first, change)", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
}

func TestNewClient(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := nodeinfo.NewClient("", "test"); !errors.Is(err, nodeinfo.ErrNoAPIServer) {
		t.Errorf("outside a pod: %v, want ErrNoAPIServer", err)
	}
	if _, err := nodeinfo.NewClient(t.TempDir()+"/none", "test"); err == nil {
		t.Error("missing kubeconfig: no error")
	}
}
