package admission

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/testwait"
)

// Texts that read as numbers too costly to parse as quantities; the UUID is one in about
// 700 random ones; "1e-99999" takes about a millisecond.
var costlyTexts = []string{"8e339452-1c2d-4b5e-9f00-0123456789ab", "3e1234567abcdef", "1e999999", "1e-999999999", "1e-99999",
	strings.Repeat("9", 1001)}

// TestQuantityLookalikesAllowed: a string that is no quantity field is no quantity, however
// it reads: the pod is admitted (200, allowed) by both webhooks.
func TestQuantityLookalikesAllowed(t *testing.T) {
	cfg := testConfig(t)
	h := testHandler(func() *Config { return cfg }, discardLog())
	base := func() *corev1.Pod {
		p := testPod("telco", "label:tier=dataplane", ctr("fwd", "podfence.io/exclusive_dp=2", "cpu=2", "memory=1Gi"))
		p.Name, p.GenerateName, p.UID = "", "fwd-7d9f-", "0df28fbd-5f5f-11e8-bc74-36e6bb280816"
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "fwd-7d9f",
			UID: "6a4a6b6c-1d2e-4f30-8a1b-2c3d4e5f6a7b"}}
		return p
	}
	for _, tc := range []struct {
		place string
		edit  func(p *corev1.Pod, s string) (reviewUID string)
	}{
		{"request uid", func(_ *corev1.Pod, s string) string { return s }},
		{"metadata.uid", func(p *corev1.Pod, s string) string { p.UID = types.UID(s); return "" }},
		{"ownerReference uid", func(p *corev1.Pod, s string) string { p.OwnerReferences[0].UID = types.UID(s); return "" }},
		{"env value", func(p *corev1.Pod, s string) string {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", Value: s}}
			return ""
		}},
		{"label", func(p *corev1.Pod, s string) string { p.Labels["build"] = s; return "" }},
		{"annotation", func(p *corev1.Pod, s string) string {
			p.Annotations = map[string]string{"example.com/id": s}
			return ""
		}},
		{"probe command", func(p *corev1.Pod, s string) string {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", s}}}}
			return ""
		}},
		{"status message", func(p *corev1.Pod, s string) string { p.Status.Message = s; return "" }},
	} {
		for _, s := range costlyTexts {
			t.Run(tc.place+"="+s[:min(len(s), 20)], func(t *testing.T) {
				p := base()
				uid := tc.edit(p, s)
				if uid == "" {
					uid = "705ab4f5-6393-11e8-b7cc-42010a800002"
				}
				raw, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := admit(t, h, uid, p.Namespace, raw); err != nil {
					t.Error(err)
				}
			})
		}
	}
	t.Run("a key that differs in case from a quantity field", func(t *testing.T) {
		raw, _ := json.Marshal(base())
		raw = []byte(strings.Replace(string(raw), `"resources":{`, `"Resources":{"limits":{"cpu":"1e-999999999"}},"resources":{`, 1))
		if err := admit(t, h, "705ab4f5-6393-11e8-b7cc-42010a800002", "telco", raw); err != nil {
			t.Error(err)
		}
	})
}

// TestQuantityFieldsBounded: each kind of quantity field of a pod, spec and status, is
// refused with 400 naming the field and the bounds, before anything parses it.
func TestQuantityFieldsBounded(t *testing.T) {
	cfg := testConfig(t)
	h := testHandler(func() *Config { return cfg }, discardLog())
	const bounds = "is too costly to parse: want at most 1000 characters and an exponent of at most 3 digits"
	ctrJSON := func(field string, v any) map[string]any {
		return map[string]any{"name": "x", "image": "x", "resources": map[string]any{field: map[string]any{"memory": v}}}
	}
	for _, tc := range []struct {
		path string             // the field in the message
		set  func(v any) [2]any // key path below the pod, value
	}{
		{`spec.containers[0].resources.limits["podfence.io/exclusive_dp"]`, nil},
		{`spec.initContainers[0].resources.requests["memory"]`, func(v any) [2]any {
			return [2]any{"spec.initContainers",
				[]any{ctrJSON("requests", v)}}
		}},
		{`spec.ephemeralContainers[0].resources.limits["memory"]`, func(v any) [2]any {
			return [2]any{"spec.ephemeralContainers",
				[]any{ctrJSON("limits", v)}}
		}},
		{`spec.overhead["cpu"]`, func(v any) [2]any { return [2]any{"spec.overhead", map[string]any{"cpu": v}} }},
		{`spec.resources.limits["cpu"]`, func(v any) [2]any {
			return [2]any{"spec.resources", map[string]any{"limits": map[string]any{"cpu": v}}}
		}},
		{`spec.volumes[0].emptyDir.sizeLimit`, func(v any) [2]any {
			return [2]any{"spec.volumes", []any{map[string]any{"name": "v", "emptyDir": map[string]any{"sizeLimit": v}}}}
		}},
		{`spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor`, func(v any) [2]any {
			return [2]any{"spec.containers", []any{map[string]any{"name": "x", "env": []any{map[string]any{"name": "M",
				"valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.memory", "divisor": v}}}}}}}
		}},
		{`spec.volumes[0].projected.sources[0].downwardAPI.items[0].resourceFieldRef.divisor`, func(v any) [2]any {
			item := map[string]any{"path": "m", "resourceFieldRef": map[string]any{"containerName": "x", "resource": "limits.memory", "divisor": v}}
			return [2]any{"spec.volumes", []any{map[string]any{"name": "v",
				"projected": map[string]any{"sources": []any{map[string]any{"downwardAPI": map[string]any{"items": []any{item}}}}}}}}
		}},
		{`spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests["storage"]`, func(v any) [2]any {
			tmpl := map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": v}}}}
			return [2]any{"spec.volumes", []any{map[string]any{"name": "v", "ephemeral": map[string]any{"volumeClaimTemplate": tmpl}}}}
		}},
		{`status.containerStatuses[0].allocatedResources["cpu"]`, func(v any) [2]any {
			return [2]any{"status.containerStatuses", []any{map[string]any{"name": "x", "allocatedResources": map[string]any{"cpu": v}}}}
		}},
	} {
		values := append([]any{json.Number("1e-999999999")}, stringsAsAny(costlyTexts)...)
		for _, v := range values {
			name := fmt.Sprintf("%s=%.20v", tc.path, v)
			if _, bare := v.(json.Number); bare {
				name += " (a bare number)"
			}
			t.Run(name, func(t *testing.T) {
				doc := podDoc(t, testPod("telco", ctr("app", "podfence.io/exclusive_dp=1")))
				if tc.set == nil {
					doc["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"].(map[string]any)["limits"].(map[string]any)["podfence.io/exclusive_dp"] = v
				} else {
					kv := tc.set(v)
					setKey(doc, kv[0].(string), kv[1])
				}
				raw, err := json.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				text := fmt.Sprint(v)
				shown := strconv.Quote(text)
				if len(text) > 40 {
					shown = fmt.Sprintf("%q… (%d bytes)", text[:40], len(text))
				}
				wantStatus(t, h, raw, http.StatusBadRequest, "pod field "+tc.path+": the quantity "+shown+" "+bounds)
			})
		}
	}
	base, _ := json.Marshal(testPod("telco", ctr("app", "cpu=1")))
	for name, tc := range map[string]struct{ old, new, msg string }{
		"a key given twice": {`"cpu":"1"`, `"cpu":"1e-999999999","cpu":"1"`,
			`pod field spec.containers[0].resources.limits["cpu"]: the quantity "1e-999999999" ` + bounds},
		"a quantity behind a Unicode space": {`"cpu":"1"`, "\"cpu\":\"\u00a01e-999999999\"",
			`pod field spec.containers[0].resources.limits["cpu"]: the quantity "\u00a01e-999999999" ` + bounds},
	} {
		t.Run(name, func(t *testing.T) {
			raw := strings.Replace(string(base), tc.old, tc.new, 1)
			wantStatus(t, h, []byte(raw), http.StatusBadRequest, tc.msg)
		})
	}
}

// wantStatus sends the pod to both webhooks and wants status and message.
func wantStatus(t *testing.T, h http.Handler, podJSON []byte, status int, msg string) {
	t.Helper()
	for _, path := range []string{PathMutate, PathValidate} {
		rec := serveBounded(t, h, path, reviewOf(t, "705ab4f5-6393-11e8-b7cc-42010a800002", "telco", podJSON))
		if got := strings.TrimSpace(rec.Body.String()); rec.Code != status || got != msg {
			t.Errorf("%s: status %d, body\n%s\nwant %d,\n%s", path, rec.Code, got, status, msg)
		}
	}
}

// serveBounded serves one request, failing the test (testwait.Deadline) when there is no
// answer: a quantity that got through to resource.ParseQuantity would never return.
func serveBounded(t testing.TB, h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, jsonRequest(path, body))
		done <- rec
	}()
	return testwait.Receive(t, done, fmt.Sprintf("%s: an answer to %.300s", path, body))
}

// admit sends a pod CREATE as the API server does: to /mutate, then the patched pod to
// /validate. It returns the refusal, if any; the answers must be 200 reviews for uid whose
// patch applies.
func admit(t *testing.T, h http.Handler, uid, ns string, podJSON []byte) error {
	t.Helper()
	for _, path := range []string{PathMutate, PathValidate} {
		rec := serveBounded(t, h, path, reviewOf(t, types.UID(uid), ns, podJSON))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("%s: status %d: %s", path, rec.Code, rec.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != types.UID(uid) {
			t.Fatalf("%s: response for uid %q: %s (%v)", path, uid, rec.Body, err)
		}
		if r := out.Response; !r.Allowed {
			return fmt.Errorf("%s: refused: %s", path, resultMessage(r))
		}
		if path == PathMutate && len(out.Response.Patch) > 0 {
			podJSON = checkPatch(t, podJSON, out.Response.Patch)
		}
	}
	return nil
}

// podDoc is the pod as generic JSON.
func podDoc(t *testing.T, p *corev1.Pod) map[string]any {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// setKey sets the value at a dotted path of object keys, making objects on the way.
func setKey(doc map[string]any, path string, v any) {
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := doc[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[k] = next
		}
		doc = next
	}
	doc[keys[len(keys)-1]] = v
}

func stringsAsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
