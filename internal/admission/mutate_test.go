package admission

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

const pools1 = "podfence.io/cpu-pools"

// TestMutate sends each pod to /mutate over HTTPS, applies the patch and checks the pod's
// annotations and labels, the warnings, and that /validate then admits it.
func TestMutate(t *testing.T) {
	srv := newTestServer(t, testConfig(t))
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		annotations map[string]string // after the patch
		labels      map[string]string
		warnings    []string
	}{
		{name: "no podfence resources: no patch", pod: testPod("shop", ctr("web", "cpu=1")), labels: nil},
		{name: "exclusive and shared pools",
			pod:         testPod("shop", ctr("app", "podfence.io/exclusive_dp=2", "podfence.io/shared_caas=500", "cpu=100m")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":2,"shared_caas":500}}`}},
		{name: "CPU-Pooler domain, requests equal to limits, init container",
			pod: testPod("shop", "annotation:team=dp", ctr("app", "nokia.k8s.io/exclusive_rt=1", "req nokia.k8s.io/exclusive_rt=1"),
				ctr("sidecar"), "init", ctr("setup", "nokia.k8s.io/shared_web=200")),
			annotations: map[string]string{"team": "dp", pools1: `{"app":{"exclusive_rt":1},"setup":{"shared_web":200}}`}},
		{name: "native sidecars named for the agent, in spec order",
			pod: testPod("shop", ctr("app", "podfence.io/exclusive_dp=2"), "sidecar", ctr("proxy", "podfence.io/exclusive_dp=2"),
				"init", ctr("setup"), "sidecar", ctr("log")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":2},"proxy":{"exclusive_dp":2}}`,
				"podfence.io/sidecars": "proxy,log"}},
		{name: "a native sidecar of a pod with a DRA claim", pod: withClaim(testPod("enclave", ctr("app", "sgx.intel.com/epc=1Ki"),
			"sidecar", ctr("proxy"))),
			annotations: map[string]string{"epc-limit.nri.io/container.app": "1024", "podfence.io/sidecars": "proxy"}},
		{name: "a sidecars annotation without sidecars is removed",
			pod:         testPod("shop", "annotation:podfence.io/sidecars=app", ctr("app", "podfence.io/exclusive_dp=2")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":2}}`},
			warnings: []string{`podfence removed annotation podfence.io/sidecars=app: the pod has no native sidecar (init container with ` +
				`restartPolicy Always)`}},
		{name: "quantity spellings: 1k millicpu, 2000m CPUs",
			pod:         testPod("shop", ctr("app", "podfence.io/shared_caas=1k"), ctr("b", "podfence.io/exclusive_dp=2000m")),
			annotations: map[string]string{pools1: `{"app":{"shared_caas":1000},"b":{"exclusive_dp":2}}`}},
		{name: "the most a pool counts: 8192 CPUs, 8192000 millicpu",
			pod:         testPod("shop", ctr("app", "podfence.io/exclusive_dp=8192", "podfence.io/shared_caas=8192000")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":8192,"shared_caas":8192000}}`}},
		{name: "the least a pool counts: 1 CPU, 1 millicpu",
			pod:         testPod("shop", ctr("app", "podfence.io/exclusive_dp=1", "podfence.io/shared_caas=1")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":1,"shared_caas":1}}`}},
		{name: "a stale cpu-pools annotation is replaced",
			pod:         testPod("shop", "annotation:"+pools1+`={"app":{"exclusive_dp":4}}`, ctr("app", "podfence.io/exclusive_dp=1")),
			annotations: map[string]string{pools1: `{"app":{"exclusive_dp":1}}`},
			warnings: []string{`podfence replaced annotation podfence.io/cpu-pools={"app":{"exclusive_dp":4}} with ` +
				`{"app":{"exclusive_dp":1}}, from the pool resources`}},
		{name: "a cpu-pools annotation without pool resources is removed",
			pod:         testPod("shop", "annotation:"+pools1+`={"app":{"exclusive_dp":4}}`, "annotation:keep=1", ctr("app")),
			annotations: map[string]string{"keep": "1"},
			warnings: []string{`podfence removed annotation podfence.io/cpu-pools={"app":{"exclusive_dp":4}}: no container asks ` +
				`for a pool resource`}},
		{name: "EPC limits in decimal bytes, init container too",
			pod: testPod("enclave", ctr("app", "sgx.intel.com/epc=64Mi", "req sgx.intel.com/epc=64Mi"), ctr("b", "sgx.intel.com/epc=1G"),
				"init", ctr("init", "sgx.intel.com/epc=4096")),
			annotations: map[string]string{"epc-limit.nri.io/container.app": "67108864", "epc-limit.nri.io/container.b": "1000000000",
				"epc-limit.nri.io/container.init": "4096"}},
		{name: "a different EPC annotation is replaced; others are left",
			pod: testPod("enclave", "annotation:epc-limit.nri.io/container.app=1", "annotation:epc-limit.nri.io/container.x=5",
				ctr("app", "sgx.intel.com/epc=1Ki")),
			annotations: map[string]string{"epc-limit.nri.io/container.app": "1024", "epc-limit.nri.io/container.x": "5"},
			warnings:    []string{"podfence replaced annotation epc-limit.nri.io/container.app=1 with 1024, from the sgx.intel.com/epc limit"}},
		{name: "profile: namespace and pod selector give a group",
			pod: testPod("telco", "label:tier=dataplane", ctr("fwd", "podfence.io/exclusive_dp=2")),
			labels: map[string]string{"tier": "dataplane",
				"podfence.io/core-sched-group": "dataplane"}, annotations: map[string]string{pools1: `{"fwd":{"exclusive_dp":2}}`}},
		{name: "profile: the pod selector does not match", pod: testPod("telco", "label:tier=control", ctr("c")),
			labels: map[string]string{"tier": "control"}},
		{name: "profile: a policy, on a pod without labels", pod: testPod("batch", ctr("job")),
			labels: map[string]string{"podfence.io/core-sched-policy": "exclusive"}},
		{name: "profile: matchExpressions and the second namespace", pod: testPod("tenant-a-dev", ctr("c")),
			labels: map[string]string{"podfence.io/core-sched-group": "tenant-a"}},
		{name: "profile: not for a pod with its own label (that agrees: see TestTenancy)", pod: testPod("telco", "label:tier=dataplane",
			"label:koordinator.sh/core-sched-group-id=dataplane", ctr("fwd")),
			labels: map[string]string{"tier": "dataplane", "koordinator.sh/core-sched-group-id": "dataplane"}},
		{name: "profile: not for a pod with a Koordinator policy", pod: testPod("batch",
			"label:koordinator.sh/core-sched-policy=exclusive", ctr("job")),
			labels: map[string]string{"koordinator.sh/core-sched-policy": "exclusive"}},
		{name: "profile: no profile for the namespace", pod: testPod("other", ctr("c"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, resp := post(t, srv, PathMutate, reviewJSON(t, tc.pod))
			if status != 200 || !resp.Allowed {
				t.Fatalf("status %d, response %s", status, body)
			}
			if resp.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
				t.Errorf("response uid %q: want the request's", resp.UID)
			}
			if len(resp.Patch) > 0 && (resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch) {
				t.Errorf("patch type %v: want JSONPatch", resp.PatchType)
			}
			got := applyPatch(t, tc.pod, resp.Patch)
			if !maps.Equal(got.Annotations, tc.annotations) || tc.annotations == nil && got.Annotations != nil {
				t.Errorf("annotations %v\nwant        %v\npatch %s", got.Annotations, tc.annotations, resp.Patch)
			}
			if !maps.Equal(got.Labels, tc.labels) {
				t.Errorf("labels %v\nwant   %v\npatch %s", got.Labels, tc.labels, resp.Patch)
			}
			if !slices.Equal(resp.Warnings, tc.warnings) {
				t.Errorf("warnings %q\nwant     %q", resp.Warnings, tc.warnings)
			}
			// Reinvocation: the patched pod needs no patch, and the validating webhook admits it.
			_, body, again := post(t, srv, PathMutate, reviewJSON(t, got))
			if !again.Allowed || len(again.Patch) != 0 || len(again.Warnings) != 0 {
				t.Errorf("second pass: %s", body)
			}
			if _, body, v := post(t, srv, PathValidate, reviewJSON(t, got)); !v.Allowed || v.Patch != nil {
				t.Errorf("validate the patched pod: %s", body)
			}
		})
	}
}

// withClaim makes pod's first container use a DRA claim.
func withClaim(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "cpus", ResourceClaimTemplateName: ptr("cpus")}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "cpus"}}
	return pod
}

func ptr[T any](v T) *T { return &v }

// TestPatchOps checks the exact patch: per-key ops with "/" escaped as "~1" and "~" as "~0"
// when the map exists, the whole map when it does not, and sorted keys.
func TestPatchOps(t *testing.T) {
	pod := testPod("telco", "annotation:x=1", "label:tier=dataplane",
		ctr("a~b", "sgx.intel.com/epc=2", "podfence.io/exclusive_dp=1"), ctr("c", "sgx.intel.com/epc=1"))
	ops, _, err := Mutate(pod, testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(ops)
	want := `[{"op":"add","path":"/metadata/annotations/epc-limit.nri.io~1container.a~0b","value":"2"},` +
		`{"op":"add","path":"/metadata/annotations/epc-limit.nri.io~1container.c","value":"1"},` +
		`{"op":"add","path":"/metadata/annotations/podfence.io~1cpu-pools","value":"{\"a~b\":{\"exclusive_dp\":1}}"},` +
		`{"op":"add","path":"/metadata/labels/podfence.io~1core-sched-group","value":"dataplane"}]`
	if string(got) != want {
		t.Errorf("patch\n%s\nwant\n%s", got, want)
	}
	pod.Annotations, pod.Labels = nil, nil
	ops, _, _ = Mutate(pod, &Config{})
	got, _ = json.Marshal(ops)
	want = `[{"op":"add","path":"/metadata/annotations","value":{"epc-limit.nri.io/container.a~b":"2",` +
		`"epc-limit.nri.io/container.c":"1","podfence.io/cpu-pools":"{\"a~b\":{\"exclusive_dp\":1}}"}}]`
	if string(got) != want {
		t.Errorf("patch without annotations\n%s\nwant\n%s", got, want)
	}
	rm, _ := json.Marshal([]Op{{Op: "remove", Path: "/a"}, {Op: "add", Path: "/b", Value: ""}})
	if want := `[{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":""}]`; string(rm) != want {
		t.Errorf("ops %s, want %s", rm, want)
	}
}
