package admission

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podfence/podfence/internal/quantity"
)

// FuzzReviewRealShaped builds from the input a valid pod CREATE as the API server sends it
// for a ReplicaSet's pod (random UUIDs, env values and probe commands that read as numbers,
// valid resources) and admits it as the API server does: every one is allowed, with a
// patch that applies.
func FuzzReviewRealShaped(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x8e, 0x33, 0x94, 0x52, 0x1c, 0x2d})             // request uid 8e339452-1c2d-…
	f.Add(append(make([]byte, 16), 0x3e, 0x12, 0x34, 0x56, 0x7a)) // pod-template-hash 3e1234567a
	f.Add([]byte("podfence: 3e1234567abcdef 1e999999 and some more bytes for pools, env and probes"))
	cfg := testConfig(f)
	h := testHandler(func() *Config { return cfg }, discardLog())
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{b: data}
		uid := src.uuid()
		pod := realShapedPod(src)
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := admit(t, h, uid, pod.Namespace, raw); err != nil {
			t.Fatalf("a valid pod refused: %v\npod %s", err, raw)
		}
	})
}

// TestRandomUIDsAllowed: 10,000 random UUIDs, three per pod CREATE as request uid, pod uid
// and ReplicaSet uid, a dozen or more of which read as numbers too costly to parse, are all
// admitted: the same patch from /mutate, and the patched pod allowed by /validate.
func TestRandomUIDsAllowed(t *testing.T) {
	cfg := testConfig(t)
	h := testHandler(func() *Config { return cfg }, discardLog())
	pod := testPod("telco", "label:tier=dataplane", ctr("fwd", "podfence.io/exclusive_dp=2", "podfence.io/shared_caas=200",
		"cpu=2", "memory=1Gi"))
	pod.Name, pod.GenerateName, pod.UID = "", "fwd-7d9f-", "@pod"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "fwd-7d9f", UID: "@owner"}}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	// The uids change neither the patch nor the patched pod: each made once, uids replaced.
	mutate := string(reviewOf(t, "@request", "telco", raw))
	rec := serveBounded(t, h, PathMutate, []byte(mutate))
	first := allowed(t, rec, "@request")
	validate := string(reviewOf(t, "@request", "telco", checkPatch(t, raw, first.Patch)))

	rng := rand.New(rand.NewPCG(12, 5))
	uuid := func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return (&byteSource{b: b[:]}).uuid()
	}
	const n = 10_000 / 3
	costly, denied := 0, 0
	for range n + 1 {
		uids := []string{uuid(), uuid(), uuid()}
		for _, u := range uids {
			if quantity.Costly([]byte(u), maxQuantityLen, maxQuantityExpDigit) {
				costly++
			}
		}
		r := strings.NewReplacer("@request", uids[0], "@pod", uids[1], "@owner", uids[2])
		for path, body := range map[string]string{PathMutate: mutate, PathValidate: validate} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, jsonRequest(path, []byte(r.Replace(body))))
			resp := allowed(t, rec, uids[0])
			if rec.Code != http.StatusOK || !resp.Allowed || path == PathMutate && !bytes.Equal(resp.Patch, first.Patch) {
				if denied++; denied <= 5 {
					t.Errorf("%s, uids %v: status %d: %s", path, uids, rec.Code, rec.Body)
				}
			}
		}
	}
	if denied > 0 || costly < 10 {
		t.Errorf("%d of %d requests refused; %d UUIDs read as costly numbers (want at least 10, so that the test tests)", denied, 2*(n+1), costly)
	}
	t.Logf("%d UUIDs, %d of them costly to parse as quantities: all admitted", 3*(n+1), costly)
}

// allowed decodes a 200 review for uid; the zero response for another status.
func allowed(t *testing.T, rec *httptest.ResponseRecorder, uid string) admissionv1.AdmissionResponse {
	t.Helper()
	var out admissionv1.AdmissionReview
	if rec.Code != http.StatusOK {
		return admissionv1.AdmissionResponse{}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != types.UID(uid) {
		t.Fatalf("response for uid %q: %s (%v)", uid, rec.Body, err)
	}
	return *out.Response
}

// byteSource makes choices from fuzz input, deterministically: zeros once it runs out.
type byteSource struct{ b []byte }

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *byteSource) intn(n int) int { return int(s.byte()) % n }

func (s *byteSource) pick(choices ...string) string { return choices[s.intn(len(choices))] }

// hex returns n bytes as 2n hex digits.
func (s *byteSource) hex(n int) string {
	var sb strings.Builder
	for range n {
		fmt.Fprintf(&sb, "%02x", s.byte())
	}
	return sb.String()
}

func (s *byteSource) digits(n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteByte('0' + s.byte()%10)
	}
	return sb.String()
}

// uuid returns a version 4 UUID from 16 bytes.
func (s *byteSource) uuid() string {
	h := []byte(s.hex(16))
	h[12], h[16] = '4', "89ab"[h[16]%4]
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}

// numberish returns text that reads as a number, or nearly: what env values, args and
// probe commands hold.
func (s *byteSource) numberish() string {
	switch s.intn(6) {
	case 0:
		return s.digits(1+s.intn(3)) + "e" + s.digits(1+s.intn(12)) // 1e999999
	case 1:
		return s.digits(1) + "e" + s.hex(1+s.intn(8)) // 3e1234567abcdef
	case 2:
		return s.digits(1+s.intn(4)) + "." + s.digits(s.intn(4)) + "E-" + s.digits(1+s.intn(12))
	case 3:
		return s.uuid()
	case 4:
		return s.hex(1 + s.intn(20))
	}
	return "-" + s.digits(1+s.intn(20))
}
