package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	kjson "sigs.k8s.io/json"

	"github.com/podfence/podfence/internal/coresched"
	"github.com/podfence/podfence/internal/kube/nodeinfo"
)

// fullNode is node i as the API server sends it to a scheduler without nodeCacheCapable:
// labels and annotations, managed fields, capacity, conditions, addresses, node info and 50
// images, about 9 KB of JSON. Every third node has not published podfence's facts.
func fullNode(i int) corev1.Node {
	name := nodeName(i)
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(1000 + i),
		CreationTimestamp: metav1.NewTime(time.Unix(1.7e9, 0)), Labels: map[string]string{}, Annotations: map[string]string{}}}
	for j := range 16 {
		n.Labels[fmt.Sprintf("topology.example.com/label-%02d", j)] = fmt.Sprintf("value-%d-%d", i, j)
	}
	n.Labels["kubernetes.io/hostname"] = name
	for j := range 6 {
		n.Annotations[fmt.Sprintf("node.example.com/annotation-%d", j)] = fmt.Sprintf("%064d", i*j)
	}
	if i%3 != 0 {
		n.Labels[nodeinfo.LabelCoreSched] = "supported"
		n.Annotations[nodeinfo.AnnotationPhysicalCores] = "64"
	}
	fields := metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{` + fmt.Sprintf(`"f:l%d":{}`, i) + `}},"f:status":{"f:conditions":{}}}`)
	for _, m := range []string{"kubelet", "kube-controller-manager", "podfence-agent", "kubectl-label"} {
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &n.CreationTimestamp, FieldsType: "FieldsV1", FieldsV1: fields})
	}
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		"podfence.io/exclusive_dp": resource.MustParse("40"), "podfence.io/shared_caas": resource.MustParse("8000")}
	n.Status.Capacity, n.Status.Allocatable = res, res
	for _, c := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable"} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
			LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: n.CreationTimestamp, Reason: "KubeletHasSufficient" + string(c),
			Message: "kubelet has sufficient " + string(c)})
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: "InternalIP", Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)},
		{Type: "Hostname", Address: name}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%036x", i),
		BootID: fmt.Sprintf("%036x", i+1), KernelVersion: "6.12.0-generic", OSImage: "Debian GNU/Linux 12 (bookworm)",
		ContainerRuntimeVersion: "containerd://2.1.0", KubeletVersion: "v1.37.2",
		OperatingSystem: "linux", Architecture: "amd64"}
	for j := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: int64(1e8 + j),
			Names: []string{fmt.Sprintf("registry.example.com/team-%d/image-%d@sha256:%064x", j%7, j, j), fmt.Sprintf("registry.example.com/team-%d/image-%d:v1.%d", j%7, j, j)}})
	}
	return n
}

// fullNodesBody is an ExtenderArgs with n full nodes and a pod of group web.
func fullNodesBody(t testing.TB, n int) []byte {
	t.Helper()
	list := corev1.NodeList{Items: make([]corev1.Node, n)}
	for i := range list.Items {
		list.Items[i] = fullNode(i)
	}
	body, err := json.Marshal(map[string]any{"Pod": json.RawMessage(webPod), "Nodes": list})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// allocated serves one request and returns the bytes it allocated (runtime.MemStats
// TotalAlloc, which counts every allocation, freed or not: an upper bound of what the
// request added to the heap at any time) and the reply (written into a buffer made
// beforehand).
func allocated(t testing.TB, h http.Handler, path string, body []byte) (uint64, *httptest.ResponseRecorder) {
	t.Helper()
	var before, after runtime.MemStats
	r := jsonPost(path, body)
	rec := httptest.NewRecorder()
	rec.Body = bytes.NewBuffer(make([]byte, 0, 16<<20)) // the reply's buffer, not counted: a server streams it out
	runtime.GC()
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, r)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %.300s", path, rec.Code, rec.Body)
	}
	return after.TotalAlloc - before.TotalAlloc, rec
}

// TestFullNodesMemory: a request with 5,000 full Node objects (nodeCacheCapable: false,
// about 70 MB) allocates less than a tenth of its size to be answered, by /filter and by
// /prioritize: the nodes are read as a stream, keeping only their names and podfence's
// label and annotation. The answers are right: /filter refuses the unpublished nodes to a
// group pod and returns the others by name.
func TestFullNodesMemory(t *testing.T) {
	if raceDetector {
		t.Skip("allocations counted without the race detector (make unit runs this test again without -race)")
	}
	const n = 5000
	body := fullNodesBody(t, n)
	h := NewHandler(NewCache(coresched.ByNamespace, quiet()), coresched.ByNamespace, quiet())
	for _, path := range []string{"/filter", "/prioritize"} {
		bytes, rec := allocated(t, h, path, body)
		t.Logf("POST %s, %d full nodes: request %.1f MB, allocated %.1f MB (%.2f x the request)", path, n,
			float64(len(body))/1e6, float64(bytes)/1e6, float64(bytes)/float64(len(body)))
		if bytes > uint64(len(body))/10 {
			t.Errorf("POST %s: allocated %d bytes for a request of %d bytes, want at most a tenth of it", path, bytes, len(body))
		}
		if path != "/filter" {
			continue
		}
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || res.Nodes == nil {
			t.Fatalf("reply %.200s: %v", rec.Body, err)
		}
		if len(res.Nodes.Items)+len(res.FailedAndUnresolvableNodes) != n || len(res.FailedAndUnresolvableNodes) != (n+2)/3 ||
			res.Nodes.Items[0].Name != nodeName(1) || res.FailedAndUnresolvableNodes[nodeName(0)] == "" {
			t.Errorf("/filter: %d nodes pass, %d refused; want every third refused (unpublished), the rest passed by name",
				len(res.Nodes.Items), len(res.FailedAndUnresolvableNodes))
		}
	}
}

// BenchmarkFullNodes: one POST /prioritize with 5,000 full Node objects; B/op is what it
// allocates, an upper bound of the memory it holds at once.
func BenchmarkFullNodes(b *testing.B) {
	body := fullNodesBody(b, 5000)
	h := NewHandler(NewCache(coresched.ByNamespace, quiet()), coresched.ByNamespace, quiet())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, jsonPost("/prioritize", body))
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %.300s", rec.Code, rec.Body)
		}
	}
}

// TestSlimNodeKeys: the label and annotation slimNode decodes are nodeinfo's, and it reads a
// node as nodeinfo.Read reads the full object.
func TestSlimNodeKeys(t *testing.T) {
	ty := reflect.TypeFor[slimNode]()
	meta, _ := ty.FieldByName("Metadata")
	labels, _ := meta.Type.FieldByName("Labels")
	annotations, _ := meta.Type.FieldByName("Annotations")
	if got := labels.Type.Field(0).Tag.Get("json"); got != nodeinfo.LabelCoreSched {
		t.Errorf("slimNode label %q, want %q", got, nodeinfo.LabelCoreSched)
	}
	if got := annotations.Type.Field(0).Tag.Get("json"); got != nodeinfo.AnnotationPhysicalCores {
		t.Errorf("slimNode annotation %q, want %q", got, nodeinfo.AnnotationPhysicalCores)
	}
	for i := range 3 {
		full := fullNode(i)
		full.Annotations[nodeinfo.AnnotationPhysicalCores] = []string{"12", "x", "-1"}[i]
		b, err := json.Marshal(full)
		if err != nil {
			t.Fatal(err)
		}
		var slim slimNode
		if err := kjson.UnmarshalCaseSensitivePreserveInts(b, &slim); err != nil {
			t.Fatal(err)
		}
		wi, wok, werr := nodeinfo.Read(&full)
		gi, gok, gerr := nodeinfo.Read(slim.node())
		if wi != gi || wok != gok || fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Errorf("node %d: slim reads %+v %v %v, the full node %+v %v %v", i, gi, gok, gerr, wi, wok, werr)
		}
	}
}

// requestBound is what one request may allocate at most, whatever it holds: the decoder's
// buffer (a value of maxValue bytes, and what it read ahead), the Pod decoded from at most
// maxValue bytes, and what is kept of maxNodes candidates.
const requestBound = 8*maxValue + maxNodes*1024

// TestRequestMemoryBound: the worst requests allocate at most requestBound each (a Pod of
// almost maxValue bytes, maxNodes nodes with the longest names as objects or as names), and
// maxInFlight of them fit in half of the extender's 512Mi limit (deploy/extender). Past the
// bounds a request is refused with 413 naming the bound: a value over maxValue (a Node, the
// Pod), more than maxNodes candidates.
func TestRequestMemoryBound(t *testing.T) {
	if raceDetector {
		t.Skip("allocations counted without the race detector (make unit runs this test again without -race)")
	}
	if maxInFlight*requestBound > 256<<20 {
		t.Errorf("%d requests of at most %d bytes: over 256 MiB", maxInFlight, requestBound)
	}
	h := NewHandler(NewCache(coresched.ByNamespace, quiet()), coresched.ByNamespace, quiet())
	long := func(i int) string { s := fmt.Sprintf("%0*d", maxNodeName, i); return s }
	bigPod := func(n int) json.RawMessage {
		return json.RawMessage(`{"metadata":{"name":"p","namespace":"shop","annotations":{"a":"` + strings.Repeat("x", n) + `"}}}`)
	}
	names := make([]string, maxNodes)
	nodes := make([]map[string]any, maxNodes)
	for i := range names {
		names[i] = long(i)
		nodes[i] = map[string]any{"metadata": map[string]any{"name": names[i], "labels": map[string]string{nodeinfo.LabelCoreSched: "supported"}}}
	}
	body := func(args map[string]any) []byte {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"largest pod", body(map[string]any{"Pod": bigPod(maxValue - 100), "NodeNames": []string{"a"}})},
		{"most names", body(map[string]any{"Pod": json.RawMessage(webPod), "NodeNames": names})},
		{"most nodes", body(map[string]any{"Pod": json.RawMessage(webPod), "Nodes": map[string]any{"items": nodes}})},
	} {
		for _, path := range []string{"/filter", "/prioritize"} {
			got, _ := allocated(t, h, path, tc.body)
			t.Logf("%s, POST %s: request %.1f MB, allocated %.1f MB", tc.name, path, float64(len(tc.body))/1e6, float64(got)/1e6)
			if got > requestBound {
				t.Errorf("%s, POST %s: allocated %d bytes, over the bound of %d", tc.name, path, got, requestBound)
			}
		}
	}
	for _, tc := range []struct {
		name, want string
		body       []byte
	}{
		{"pod over maxValue", fmt.Sprintf("ExtenderArgs: a JSON value (the Pod, NodeNames, a Node or another field) over %d bytes", maxValue),
			body(map[string]any{"Pod": bigPod(maxValue), "NodeNames": []string{"a"}})},
		{"node over maxValue", fmt.Sprintf("over %d bytes", maxValue), body(map[string]any{"Pod": json.RawMessage(webPod),
			"Nodes": map[string]any{"items": []any{map[string]any{"metadata": map[string]any{"name": "a", "annotations": map[string]string{"a": strings.Repeat("x", maxValue)}}}}}})},
		{"too many names", fmt.Sprintf("ExtenderArgs: %d candidate nodes or more, want at most %d", maxNodes+1, maxNodes),
			body(map[string]any{"Pod": json.RawMessage(webPod), "NodeNames": append(names, "one-more")})},
		{"too many nodes", fmt.Sprintf("ExtenderArgs: %d candidate nodes or more, want at most %d", maxNodes+1, maxNodes),
			body(map[string]any{"Pod": json.RawMessage(webPod), "Nodes": map[string]any{"items": append(nodes, nodes[0])}})},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, jsonPost("/filter", tc.body))
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %.200s, want 413 %s", tc.name, rec.Code, rec.Body, tc.want)
		}
	}
}
