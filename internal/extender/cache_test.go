package extender

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/testwait"
)

// facts is one node's facts for a pod of group.
func facts(c *Cache, node, group string) Facts {
	var f Facts
	c.Each([]string{node}, group, func(_ int, n Facts) { f = n })
	return f
}

func TestCacheFromInformers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(testNode("a", "supported", 8, 16),
		testPod("shop", "w1", "a", 1500, coresched.LabelGroup, "web"),
		testPod("shop", "s1", "a", 500),
		testPod("shop", "pending", "", 500, coresched.LabelGroup, "other"))
	c := NewCache(coresched.ByNamespace, quiet())
	if err := Watch(ctx, client, c); err != nil {
		t.Fatal(err)
	}
	want := Facts{Known: true, CoreSched: true, Cores: 8, ThreadsPerCore: 2, Groups: 2, HasGroup: true, BusyCores: 1}
	if got := facts(c, "a", "group:shop/web"); got != want {
		t.Fatalf("after sync: %+v, want %+v", got, want)
	}
	pods := client.CoreV1().Pods("shop")
	nodes := client.CoreV1().Nodes()

	// An exclusive pod arrives; a pod finishes; another pod is deleted.
	if _, err := pods.Create(ctx, testPod("shop", "e1", "a", 3000, coresched.LabelPolicy, coresched.PolicyExclusive),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the exclusive pod", func() bool { f := facts(c, "a", ""); return f.Groups == 3 && f.BusyCores == 3 })
	done := testPod("shop", "w1", "a", 1500, coresched.LabelGroup, "web")
	done.Status.Phase = corev1.PodSucceeded
	if _, err := pods.Update(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the finished pod to leave", func() bool { return !facts(c, "a", "group:shop/web").HasGroup })
	if err := pods.Delete(ctx, "e1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the deleted pod to leave", func() bool { f := facts(c, "a", ""); return f.Groups == 1 && f.BusyCores == 1 })

	// The agent republishes; the node goes.
	n := testNode("a", "unsupported", 8, 16)
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "unsupported", func() bool { return !facts(c, "a", "").CoreSched })
	if err := nodes.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the node to be unknown", func() bool { return !facts(c, "a", "").Known })
	if f := facts(c, "a", "ns:shop"); !f.HasGroup || f.Groups != 1 {
		t.Errorf("pods of a deleted node: %+v, want still counted", f)
	}
	if err := pods.Delete(ctx, "s1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, "the cache to be empty", func() bool { return c.Len() == 0 })
}

// TestCacheCounts: moves and repeated updates keep the sums exact.
func TestCacheCounts(t *testing.T) {
	c := NewCache(coresched.ByPod, quiet())
	c.SetNode(testNode("a", "supported", 4, 8))
	p := testPod("ns", "p", "a", 2500)
	for range 3 {
		c.SetPod(p) // updates do not double count
	}
	if f := facts(c, "a", ""); f.Groups != 1 || f.BusyCores != 2 {
		t.Errorf("one pod by pod default: %+v, want 1 group, 2 busy cores", f)
	}
	p.Spec.NodeName = "b"
	c.SetPod(p)
	if f := facts(c, "a", ""); f.Groups != 0 || f.BusyCores != 0 {
		t.Errorf("after the move, a: %+v", f)
	}
	if f := facts(c, "b", "pod:ns/p"); f.Known || !f.HasGroup {
		t.Errorf("after the move, b: %+v", f)
	}
	c.DeletePod(p.UID)
	c.DeletePod(p.UID)
	if c.Len() != 1 {
		t.Errorf("Len = %d, want 1 (a)", c.Len())
	}
}

// TestCacheGroupsByNamespace: the extender scores with the agents' group identity, so one
// label in two namespaces is two groups: a pod of namespace b named like a's group does not
// "share" a's group on a node.
func TestCacheGroupsByNamespace(t *testing.T) {
	c := NewCache(coresched.ByNamespace, quiet())
	c.SetNode(testNode("n", "supported", 8, 16))
	c.SetPod(testPod("a", "a1", "n", 500, coresched.LabelGroup, "tenant-a"))
	c.SetPod(testPod("a", "a2", "n", 500, coresched.KoordLabelGroup, "tenant-a"))
	for _, tc := range []struct {
		pod      *corev1.Pod
		hasGroup bool
	}{
		{pod: testPod("a", "a3", "", 500, coresched.LabelGroup, "tenant-a"), hasGroup: true},
		{pod: testPod("b", "b1", "", 500, coresched.LabelGroup, "tenant-a")},
		{pod: testPod("b", "b2", "", 500, coresched.KoordLabelGroup, "tenant-a")},
	} {
		p, err := PodFor(coresched.ByNamespace, tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		f := facts(c, "n", p.Group.ID())
		if f.Groups != 1 || f.HasGroup != tc.hasGroup {
			t.Errorf("pod %s/%s (group %s): %+v, want 1 group on the node, HasGroup %v", tc.pod.Namespace, tc.pod.Name, p.Group,
				f, tc.hasGroup)
		}
	}
}

// TestPodForCountsInitContainersAndSidecars: a pod's CPU request is the kubelet's and the
// scheduler's: its app containers and native sidecars (init containers with restartPolicy
// Always, which run beside them) together, or a plain init container with the sidecars
// declared before it, whichever is more.
func TestPodForCountsInitContainersAndSidecars(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	cpu := func(name, milli string, sidecar bool) corev1.Container {
		c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(milli)}}}
		if sidecar {
			c.RestartPolicy = &always
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		init  []corev1.Container
		apps  []corev1.Container
		milli int64
	}{
		{name: "apps only", apps: []corev1.Container{cpu("a", "1", false), cpu("b", "500m", false)}, milli: 1500},
		{name: "a plain init container larger than the apps", init: []corev1.Container{cpu("i", "3", false)},
			apps: []corev1.Container{cpu("a", "1", false)}, milli: 3000},
		{name: "a sidecar beside the apps", init: []corev1.Container{cpu("s", "1", true), cpu("i", "1", false)},
			apps: []corev1.Container{cpu("a", "2", false)}, milli: 3000},
		{name: "a plain init container after a sidecar", init: []corev1.Container{cpu("s", "1", true), cpu("i", "3", false)},
			apps: []corev1.Container{cpu("a", "2", false)}, milli: 4000},
		{name: "a plain init container before a sidecar", init: []corev1.Container{cpu("i", "3", false), cpu("s", "1", true)},
			apps: []corev1.Container{cpu("a", "1", false)}, milli: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.apps}}
			p, err := PodFor(coresched.ByNamespace, pod)
			if err != nil || p.MilliCPU != tc.milli {
				t.Errorf("MilliCPU %d, err %v; want %d", p.MilliCPU, err, tc.milli)
			}
		})
	}
}
