package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/podfence/podfence/internal/kube/quantityguard"
)

// TestReviewFromAPIServer sends a review as kube-apiserver writes it and checks the exact
// patch, then that the validating webhook admits the patched pod.
func TestReviewFromAPIServer(t *testing.T) {
	body, err := os.ReadFile("testdata/review-create.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, testConfig(t))
	status, raw, resp := post(t, srv, PathMutate, body)
	if status != http.StatusOK || !resp.Allowed {
		t.Fatalf("status %d: %s", status, raw)
	}
	want := `[{"op":"add","path":"/metadata/annotations/epc-limit.nri.io~1container.fwd","value":"33554432"},` +
		`{"op":"add","path":"/metadata/annotations/podfence.io~1cpu-pools","value":"{\"fwd\":{\"exclusive_dp\":2,\"shared_caas\":200},\"setup\":{\"shared_caas\":100}}"},` +
		`{"op":"add","path":"/metadata/labels/podfence.io~1core-sched-group","value":"dataplane"}]`
	if string(resp.Patch) != want {
		t.Errorf("patch\n%s\nwant\n%s", resp.Patch, want)
	}
	if !strings.Contains(raw, `"uid":"0df28fbd-5f5f-11e8-bc74-36e6bb280816"`) {
		t.Errorf("response without the request's uid: %s", raw)
	}
	pod := applyPatch(t, mustPod(t, body), resp.Patch)
	if _, raw, v := post(t, srv, PathValidate, reviewJSON(t, pod)); !v.Allowed {
		t.Errorf("validate the patched pod: %s", raw)
	}
}

// mustPod reads the pod out of an AdmissionReview.
func mustPod(t *testing.T, review []byte) *corev1.Pod {
	t.Helper()
	var r admissionv1.AdmissionReview
	var pod corev1.Pod
	if err := json.Unmarshal(review, &r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Request.Object.Raw, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// TestBadRequests checks that what is not a usable review gets an HTTP error with the reason,
// and that a review about something else than a pod CREATE is allowed unchanged.
func TestBadRequests(t *testing.T) {
	srv := newTestServer(t, &Config{})
	bounds := fmt.Sprintf("is too costly to parse: want at most %d characters and an exponent of at most %d digits",
		quantityguard.MaxLen, quantityguard.MaxExponentDigits)
	review := func(edit func(string) string) []byte {
		return []byte(edit(string(reviewJSON(t, testPod("s", ctr("app", "podfence.io/exclusive_dp=1"))))))
	}
	replace := func(old, new string) func(string) string {
		return func(s string) string { return strings.Replace(s, old, new, 1) }
	}
	for _, tc := range []struct {
		name        string
		method      string
		contentType string
		body        []byte
		status      int
		msg         string // the response text, or "allowed" for an allowed review
	}{
		{name: "not JSON", body: []byte("{"), status: 400, msg: "decode AdmissionReview: unexpected end of JSON input"},
		{name: "empty body", body: nil, status: 400, msg: "decode AdmissionReview: unexpected end of JSON input"},
		{name: "a JSON array", body: []byte("[]"), status: 400,
			msg: "decode AdmissionReview: json: cannot unmarshal array into Go value of type v1.AdmissionReview"},
		{name: "v1beta1", body: review(replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1")), status: 400,
			msg: `apiVersion "admission.k8s.io/v1beta1" kind "AdmissionReview": want admission.k8s.io/v1 AdmissionReview (set ` +
				`admissionReviewVersions: [v1])`},
		{name: "no request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), status: 400,
			msg: "AdmissionReview has no request"},
		{name: "no uid", body: review(replace(`"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"`, `"uid":""`)), status: 400,
			msg: "AdmissionReview request has no uid"},
		{name: "no object", body: review(replace(`"object":{`, `"other":{`)), status: 400,
			msg: "AdmissionReview request for a pod CREATE has no object"},
		{name: "a pod that is not one", body: review(replace(`"object":{`, `"object":{"spec":7,`)), status: 400,
			msg: "decode the request's pod: json: cannot unmarshal number into Go struct field Pod.spec of type v1.PodSpec"},
		{name: "a bad quantity", body: review(replace(`"podfence.io/exclusive_dp":"1"`, `"podfence.io/exclusive_dp":"x"`)), status: 400,
			msg: "decode the request's pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
		{name: "a quantity with a huge exponent", body: review(replace(`"podfence.io/exclusive_dp":"1"`,
			`"podfence.io/exclusive_dp":"1e-999999999"`)), status: 400,
			msg: `pod field spec.containers[0].resources.limits["podfence.io/exclusive_dp"]: the quantity "1e-999999999" ` + bounds},
		{name: "a quantity too long", body: review(replace(`"podfence.io/exclusive_dp":"1"`,
			`"podfence.io/exclusive_dp":"`+strings.Repeat("9", 1001)+`"`)), status: 400,
			msg: `pod field spec.containers[0].resources.limits["podfence.io/exclusive_dp"]: the quantity ` +
				`"9999999999999999999999999999999999999999"… (1001 bytes) ` + bounds},
		{name: "a pod of too many values", body: review(replace(`"object":{`, `"object":{"x":[`+strings.Repeat("null,", maxPodValues)+`0],`)),
			status: 400, msg: "the request's pod has over 5000 JSON values (objects, arrays and their elements): it would take more " +
				"memory to decode than the webhook gives a review"},
		{name: "not JSON content", contentType: "text/plain", body: review(replace("", "")), status: 415,
			msg: `content type "text/plain": want application/json`},
		{name: "too large", body: bytes.Repeat([]byte(" "), MaxReviewBytes+1), status: 413, msg: "request body over 4194304 bytes"},
		{name: "GET", method: http.MethodGet, status: 405, msg: "Method Not Allowed"},
		{name: "UPDATE is allowed unchanged", body: review(replace(`"operation":"CREATE"`, `"operation":"UPDATE"`)), status: 200, msg: "allowed"},
		{name: "a subresource is allowed unchanged", body: review(replace(`"operation":"CREATE"`,
			`"operation":"CREATE","subResource":"binding"`)), status: 200, msg: "allowed"},
		{name: "another resource is allowed unchanged", body: review(replace(`"resource":"pods"`, `"resource":"services"`)),
			status: 200, msg: "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{PathMutate, PathValidate} {
				method, ct := tc.method, tc.contentType
				if method == "" {
					method = http.MethodPost
				}
				if ct == "" {
					ct = "application/json; charset=utf-8"
				}
				req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(tc.body))
				req.Header.Set("Content-Type", ct)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := strings.TrimSpace(string(b))
				if tc.status == 200 && strings.Contains(got, `"allowed":true`) && !strings.Contains(got, `"patch"`) {
					got = "allowed"
				}
				if resp.StatusCode != tc.status || got != tc.msg {
					t.Errorf("%s: status %d, body %q\nwant %d, %q", path, resp.StatusCode, got, tc.status, tc.msg)
				}
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	srv := newTestServer(t, nil)
	resp, err := srv.Client().Get(srv.URL + PathHealthz)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" {
		t.Errorf("healthz: %d %q", resp.StatusCode, b)
	}
}

func TestCountValues(t *testing.T) {
	for doc, want := range map[string]int{
		``:                             0,
		`"a"`:                          0,
		`{}`:                           1,
		`{"a":[1,2,{"b":null}],"c":3}`: 6,
		`{"a,{[":"\",{["}`:             1,
		`["\\",{}]`:                    3,
		`"unterminated\`:               0,
		`{"cut short`:                  1,
	} {
		if got := countValues([]byte(doc), 100); got != want {
			t.Errorf("countValues(%s) = %d, want %d", doc, got, want)
		}
	}
	if got := countValues([]byte(strings.Repeat("[", 50)), 10); got != 11 {
		t.Errorf("countValues past the limit = %d, want 11", got)
	}
}

// TestReviewAtTheBounds: a body of MaxReviewBytes and a pod of maxPodValues values are
// reviewed, whether the body's length is given or not; one byte or one value more is refused.
func TestReviewAtTheBounds(t *testing.T) {
	h := testHandler(func() *Config { return testConfig(t) }, discardLog())
	review := string(reviewJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1"))))
	padded := func(n int) []byte { return []byte(review + strings.Repeat(" ", n-len(review))) }
	// values pads the pod to n JSON values with an array of nulls.
	values := func(n int) []byte {
		pod := string(podJSON(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1"))))
		pad := n - countValues([]byte(pod), n) - 2 // the array and the comma after it, then a comma before each more null
		pod = strings.Replace(pod, "{", `{"x":[null`+strings.Repeat(",null", pad)+"],", 1)
		return reviewOf(t, "705ab4f5-6393-11e8-b7cc-42010a800002", "telco", []byte(pod))
	}
	const allowed = `"allowed":true`
	for _, tc := range []struct {
		name          string
		body          []byte
		unknownLength bool
		status        int
		msg           string // in the answer
	}{
		{name: "MaxReviewBytes", body: padded(MaxReviewBytes), status: 200, msg: allowed},
		{name: "MaxReviewBytes, length not given", body: padded(MaxReviewBytes), unknownLength: true, status: 200, msg: allowed},
		{name: "a byte more, length not given", body: padded(MaxReviewBytes + 1), unknownLength: true, status: 413,
			msg: "request body over 4194304 bytes"},
		{name: "a small body, length not given", body: []byte(review), unknownLength: true, status: 200, msg: allowed},
		{name: "maxPodValues", body: values(maxPodValues), status: 200, msg: allowed},
		{name: "a value more", body: values(maxPodValues + 1), status: 400, msg: "the request's pod has over 5000 JSON values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := jsonRequest(PathMutate, tc.body)
			if tc.unknownLength {
				req.ContentLength = -1
			}
			rec := answer(t, h, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.msg) {
				t.Errorf("status %d, body %.300s\nwant %d with %s", rec.Code, rec.Body, tc.status, tc.msg)
			}
		})
	}
}

// TestPodNamespaceFromRequest: a pod without a namespace, as a user may create it, is in the
// request's: a profile for that namespace gives it its group.
func TestPodNamespaceFromRequest(t *testing.T) {
	h := testHandler(func() *Config { return testConfig(t) }, discardLog())
	pod := testPod("", "label:tier=dataplane", ctr("fwd"))
	rec := serveBounded(t, h, PathMutate, reviewOf(t, "705ab4f5-6393-11e8-b7cc-42010a800002", "telco", podJSON(t, pod)))
	want := `[{"op":"add","path":"/metadata/labels/podfence.io~1core-sched-group","value":"dataplane"}]`
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || string(out.Response.Patch) != want {
		t.Errorf("answer %s (%v)\nwant the patch %s", rec.Body, err, want)
	}
}

func podJSON(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
