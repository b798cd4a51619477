package admission

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// Bounds of FuzzReviewBody on one request's allocations. A JSON value decodes into at most
// a few hundred bytes (a corev1.Container is 408), which Mutate and Validate copy a few
// times.
const (
	fuzzAllocPerValue  = 16 << 10
	fuzzAllocPerByte   = 64
	fuzzAllocPerReview = 1 << 20
)

// FuzzReviewBody sends any body to both webhooks, with their limits: each request is
// answered, with a 200 AdmissionReview or a 4xx with a message, and allocates at most
// fuzzAllocPerByte per byte and fuzzAllocPerValue per JSON value of its body, plus
// fuzzAllocPerReview. Its work is bounded by what it allocates, not by a timeout: how long
// a review takes depends on the machine (untimed), and one that never ends fails at go
// test's timeout.
func FuzzReviewBody(f *testing.F) {
	if b, err := os.ReadFile("testdata/review-create.json"); err == nil {
		f.Add(b)
	}
	base := string(reviewJSON(f, testPod("telco", "label:tier=dataplane", "annotation:podfence.io/cpus=[]",
		ctr("app", "podfence.io/exclusive_dp=2", "req podfence.io/exclusive_dp=2", "sgx.intel.com/epc=1Mi"), "init",
		ctr("init", "podfence.io/shared_caas=100"))))
	f.Add([]byte(base))
	// Quantities too costly to parse, bare and quoted, in each kind of quantity field.
	for _, q := range []string{`1e-999999999`, `"1e-999999999"`, `-1E+999999999`, `"1e99999"`, `1e-99999`,
		`"` + strings.Repeat("9", 1001) + `"`, `0.` + strings.Repeat("0", 998) + `1e-999`, `"\u00a01e-999999999"`} {
		f.Add([]byte(strings.Replace(base, `"podfence.io/exclusive_dp":"2"`, `"podfence.io/exclusive_dp":`+q, 1)))
		f.Add([]byte(strings.Replace(base, `"sgx.intel.com/epc":"1Mi"`, `"sgx.intel.com/epc":`+q, 1)))
		f.Add([]byte(strings.Replace(base, `"spec":{`, `"spec":{"overhead":{"cpu":`+q+`},`, 1)))
		f.Add([]byte(strings.Replace(base, `"spec":{`, `"spec":{"volumes":[{"name":"v","emptyDir":{"sizeLimit":`+q+`}}],`, 1)))
		f.Add([]byte(strings.Replace(base, `"annotations":{`, `"annotations":{"epc-limit.nri.io/pod":`+q+`,`, 1)))
	}
	// Dense pods: every element a Container.
	f.Add([]byte(strings.Replace(base, `"containers":[`, `"containers":[`+strings.Repeat("null,", 1000), 1)))
	f.Add([]byte(strings.Replace(base, `"containers":[`, `"containers":[`+strings.Repeat("{},", 1000), 1)))
	f.Add([]byte(strings.Replace(base, `"containers":[`, `"containers":[`+strings.Repeat("0,", 6000), 1)))
	f.Add([]byte(strings.Replace(base, `"name":"p"`, `"name":"`+strings.Repeat("n", 10000)+`"`, 1)))
	f.Add([]byte(strings.Replace(base, `"containers":[`, `"containers":[`+
		strings.Repeat(`{"name":"c","resources":{"limits":{"podfence.io/shared_x":"1"}}},`, 200), 1))) // a long refusal
	f.Add([]byte(strings.Replace(base, `"operation":"CREATE"`, `"operation":"UPDATE","oldObject":{"spec":7}`, 1)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":null}}`))
	f.Add([]byte(`{"request":{}}`))
	f.Add([]byte(`[`))
	f.Add([]byte{})

	cfg := testConfig(f)
	h := untimed(newHandler(func() *Config { return cfg }, discardLog(), Limits{})).mux()
	f.Fuzz(func(t *testing.T, body []byte) {
		bound := uint64(fuzzAllocPerReview + fuzzAllocPerByte*len(body) + fuzzAllocPerValue*countValues(body, math.MaxInt))
		for _, path := range []string{PathMutate, PathValidate} {
			req := jsonRequest(path, body)
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			h.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
				t.Fatalf("%s: %d bytes allocated for a body of %d bytes, %d values: want at most %d", path, alloc, len(body),
					countValues(body, math.MaxInt), bound)
			}
			switch {
			case rec.Code >= 400 && rec.Code < 500 && rec.Body.Len() > 0:
				if rec.Body.Len() > 2*maxMessageBytes {
					t.Fatalf("%s: status %d with a message of %d bytes", path, rec.Code, rec.Body.Len())
				}
			case rec.Code == http.StatusOK:
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
					t.Fatalf("%s: response %s: %v", path, rec.Body, err)
				}
				checkBounded(t, path, out.Response)
			default:
				t.Fatalf("%s: status %d: %.300s", path, rec.Code, rec.Body)
			}
		}
	})
}

// checkBounded fails when a response's refusal or warnings pass their bounds.
func checkBounded(t *testing.T, path string, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	if m := resultMessage(resp); len(m) > maxMessageBytes+64 {
		t.Fatalf("%s: refusal of %d bytes, want at most %d: %.300s", path, len(m), maxMessageBytes, m)
	}
	if len(resp.Warnings) > maxWarnings {
		t.Fatalf("%s: %d warnings, want at most %d", path, len(resp.Warnings), maxWarnings)
	}
	for _, w := range resp.Warnings {
		if len(w) > maxWarningBytes+64 {
			t.Fatalf("%s: warning of %d bytes, want at most %d: %.300s", path, len(w), maxWarningBytes, w)
		}
	}
}
