package extender

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/kube/nodeinfo"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testNode is a node the agent published: support "" leaves it unpublished.
func testNode(name, support string, cores, cpus int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	if support != "" {
		n.Labels[nodeinfo.LabelCoreSched] = support
		n.Annotations[nodeinfo.AnnotationPhysicalCores] = strconv.Itoa(cores)
	}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}
	return n
}

// testPod is a pod in namespace ns bound to node ("" for pending) with labels given as
// key, value pairs and one container requesting milli CPU.
func testPod(ns, name, node string, milli int64, labels ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
		Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		p.Labels[labels[i]] = labels[i+1]
	}
	p.Spec.NodeName = node
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}}
	p.Status.Phase = corev1.PodRunning
	return p
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }
