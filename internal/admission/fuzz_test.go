package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// FuzzReview sends any body to both webhooks: the answer is a 200 AdmissionReview whose
// patch applies to the request's object, or a 4xx with a message; never a panic.
func FuzzReview(f *testing.F) {
	if b, err := os.ReadFile("testdata/review-create.json"); err == nil {
		f.Add(b)
	}
	f.Add(reviewJSON(f, testPod("telco", "label:tier=dataplane", ctr("app", "podfence.io/exclusive_dp=2", "sgx.intel.com/epc=1Mi"))))
	f.Add(reviewJSON(f, testPod("s", "annotation:podfence.io/cpus=[]", ctr("app", "podfence.io/shared_caas=0.5"))))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":null}}`))
	f.Add([]byte(`{"request":{}}`))
	cfg := testConfig(f)
	h := testHandler(func() *Config { return cfg }, discardLog())
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{PathMutate, PathValidate} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, jsonRequest(path, body))
			if rec.Code >= 400 && rec.Code < 500 && rec.Body.Len() > 0 {
				continue
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: response %s: %v", path, rec.Body, err)
			}
			if len(out.Response.Patch) > 0 { // on the pod as the API server serialises it
				_, pod, err := readReview(httptest.NewRecorder(), jsonRequest(path, body))
				if err != nil || pod == nil {
					t.Fatalf("%s: a patch for a request that is not a pod CREATE (%v)", path, err)
				}
				doc, _ := json.Marshal(pod)
				checkPatch(t, doc, out.Response.Patch)
			}
		}
	})
}

func jsonRequest(path string, body []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// checkPatch applies patch to doc and fails when that does not work.
func checkPatch(t *testing.T, doc, patch []byte) []byte {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("patch %s on %s: %v", patch, doc, err)
	}
	return out
}

// FuzzMutate mutates any pod: the patch is valid JSON that applies to the pod, and the
// patched pod needs no further patch.
func FuzzMutate(f *testing.F) {
	for _, p := range []*corev1.Pod{
		testPod("telco", "label:tier=dataplane", ctr("app", "podfence.io/exclusive_dp=2", "nokia.k8s.io/shared_caas=100")),
		testPod("batch", "annotation:podfence.io/cpu-pools={}", "init", ctr("i", "sgx.intel.com/epc=4Ki")),
		testPod("tenant-a", "annotation:x/y~z=1", ctr("a/b~c", "sgx.intel.com/epc=1")),
	} {
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	cfg := testConfig(f)
	f.Fuzz(func(t *testing.T, podJSON []byte) {
		var pod corev1.Pod
		// As readReview decodes a pod: case-sensitive, after bounding its quantity fields.
		if checkPodQuantities(podJSON) != nil || kjson.UnmarshalCaseSensitivePreserveInts(podJSON, &pod) != nil {
			return
		}
		ops, _, err := Mutate(&pod, cfg)
		_ = Validate(&pod, cfg)
		if err != nil {
			return
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			t.Fatalf("ops %v: %v", ops, err)
		}
		doc, _ := json.Marshal(&pod)
		var patched corev1.Pod
		if err := json.Unmarshal(checkPatch(t, doc, patch), &patched); err != nil {
			t.Fatalf("patched pod: %v", err)
		}
		again, _, err := Mutate(&patched, cfg)
		if err != nil || len(again) > 0 {
			t.Fatalf("second pass on the patched pod: %v, %v (first patch %s)", again, err, patch)
		}
	})
}
