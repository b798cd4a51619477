package quantityguard

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	kjson "sigs.k8s.io/json"

	"github.com/podfence/podfence/internal/testwait"
)

const bounds = "is too costly to parse: want at most 1000 characters and an exponent of at most 3 digits"

// TestCheck: the first quantity beyond the bounds is an *Error naming the document, the field,
// the text cut to 40 bytes and the bounds; anything else is left alone.
func TestCheck(t *testing.T) {
	long, key := strings.Repeat("9", 1001), strings.Repeat("k", 400)
	for _, tc := range []struct{ doc, err string }{
		{`{"Pod":{"spec":{"overhead":{"cpu":"1e-999999999"}}}}`,
			`ExtenderArgs field Pod.spec.overhead["cpu"]: the quantity "1e-999999999" ` + bounds},
		{`{"Nodes":{"items":[{},{"status":{"capacity":{"cpu":1e-9999}}}]}}`,
			`ExtenderArgs field Nodes.items[1].status.capacity["cpu"]: the quantity "1e-9999" ` + bounds},
		{`{"Nodes":{"items":[{"status":{"allocatable":{"memory":"` + long + `"}}}]}}`,
			`ExtenderArgs field Nodes.items[0].status.allocatable["memory"]: the quantity "` + long[:40] + `"… (1001 bytes) ` + bounds},
		{`{"Nodes":{"items":[{"status":{"capacity":{"` + key + `":"1e-1000"}}}]}}`, // a key no resource name can be: cut
			`ExtenderArgs field Nodes.items[0].status.capacity["` + key[:320] + `"… (400 bytes)]: the quantity "1e-1000" ` + bounds},
		{"{\"Pod\":{\"spec\":{\"overhead\":{\"cpu\":\"\u00a01e-1000\"}}}}",
			`ExtenderArgs field Pod.spec.overhead["cpu"]: the quantity "\u00a01e-1000" ` + bounds},
		{`{"Pod":{"spec":{"overhead":{"cpu":"1e-999","memory":"9e999"}}},"NodeNames":["1e-999999999"]}`, ""},
		{`{"Pod":{"metadata":{"uid":"1e-999999999"}},"Nodes":{"items":[{"metadata":{"name":"1e-999999999"}}]}}`, ""},
	} {
		err := Check([]byte(tc.doc), For[extenderv1.ExtenderArgs](), "ExtenderArgs")
		var qe *Error
		if tc.err == "" && err != nil || tc.err != "" && (!errors.As(err, &qe) || err.Error() != tc.err) {
			t.Errorf("Check(%.80s) = %v,\nwant %s", tc.doc, err, tc.err)
		}
	}
}

// TestWalkOneValue: a document is one valid JSON value: nothing, data after it, or bad
// syntax is an error.
func TestWalkOneValue(t *testing.T) {
	for doc, want := range map[string]string{
		``:                     "no JSON value",
		` `:                    "no JSON value",
		`{"Pod":{}} x`:         "data after the JSON value, which ends at byte 10",
		`{"Pod":{}}{"Pod":{}}`: "data after the JSON value, which ends at byte 10",
		`{"Pod":{}},`:          "data after the JSON value, which ends at byte 10",
		`{"Pod":{"spec":{}}`:   "unexpected EOF",
		`{"Pod":{"spec":{]}}`:  "invalid character ']' looking for beginning of object key string",
		`[1,]`:                 "invalid character ']' looking for beginning of value",
		`"\x"`:                 `invalid character 'x' in string escape code`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001): "invalid character '[' exceeded max depth", // as decoding says
		"{\"Pod\":{}}\n\t ":      "",
		`null`:                   "",
		`{"Pod":{"spec":[1,2]}}`: "",
	} {
		err := Walk([]byte(doc), For[extenderv1.ExtenderArgs](), func(string, []byte) error { return nil })
		if got := errText(err); got != want {
			t.Errorf("Walk(%q) = %q, want %q", doc, got, want)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCut(t *testing.T) {
	for in, want := range map[string]string{
		"1e-9":                        `"1e-9"`,
		strings.Repeat("é", 25):       `"` + strings.Repeat("é", 20) + `"… (50 bytes)`,
		"x" + strings.Repeat("é", 25): `"x` + strings.Repeat("é", 19) + `"… (51 bytes)`,
	} {
		if got := Cut([]byte(in), 40); got != want {
			t.Errorf("Cut(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestAtBoundIsCheap: every costliest text the bounds let through parses and compares in
// under 300 µs (about 50 µs at worst; 1 to 3.6 ms with 5 exponent digits, the bound before),
// and the texts just beyond are refused.
// allocated is the bytes f allocates per call, averaged over n calls.
func allocated(n int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
}

func TestAtBoundIsCheap(t *testing.T) {
	// Parsing works on big integers whose size follows the exponent; the bytes it allocates
	// track its cost without timing it: ~3 KB for "1e-999", ~12 KB for 1000 digits, but 24 KB
	// at 4 exponent digits and 236 KB at 5 (~1 ms each).
	const limit = 16 << 10
	one := resource.MustParse("1")
	for name, s := range atBound() {
		if Costly([]byte(s)) {
			t.Errorf("%s: %.20s… refused", name, s)
		}
		if _, err := resource.ParseQuantity(s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		per := allocated(20, func() {
			q, _ := resource.ParseQuantity(s)
			_, _ = q.MilliValue(), q.Cmp(one)
		})
		if per > limit {
			t.Errorf("%s (%d characters): %d bytes allocated to parse, want at most %d", name, len(s), per, limit)
		}
	}
	for _, s := range []string{"1e-" + strings.Repeat("9", MaxExponentDigits+1), strings.Repeat("9", MaxLen+1), "1E+0001000"} {
		if !Costly([]byte(s)) {
			t.Errorf("%.20s… (%d characters) passes", s, len(s))
		}
	}
}

// FuzzCheck: whatever the document, Check answers, and a document it passes as ExtenderArgs
// or as a pod decodes as such (or is refused): no quantity it did not look at is parsed,
// which would take years (the wait ends at testwait.Deadline).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"cpu":"1e-999999999"}}}]}}}`,
		`{"Pod":{"spec":{"overhead":{"cpu":1e-999999999}}},"NodeNames":["a"]}`,
		`{"Nodes":{"items":[{"status":{"capacity":{"cpu":"1e-99999","memory":"1Gi"}}}]}}`,
		`{"Pod":{"spec":{"Overhead":{"cpu":"1e-999999999"}}}}`,
		`{"Pod":{"spec":{"overhead":{"cpu":"1e-999999999","cpu":"1"}}}}`,
		`{"Pod":{"spec":{"overhead":{"cpu":"\u00a01e-999999999"}}}}`,
		`{"Pod":{}} {"Pod":{"spec":{"overhead":{"cpu":"1e-999999999"}}}}`,
		`{"spec":{"overhead":{"cpu":"1e-999999999"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		argsOK := Check(doc, For[extenderv1.ExtenderArgs](), "ExtenderArgs") == nil
		podOK := Check(doc, For[corev1.Pod](), "pod") == nil
		done := make(chan struct{})
		go func() {
			defer close(done)
			var args extenderv1.ExtenderArgs
			if argsOK && kjson.UnmarshalCaseSensitivePreserveInts(doc, &args) == nil && args.Pod != nil {
				_ = args.Pod.Spec.Overhead.Cpu().MilliValue()
			}
			var pod corev1.Pod
			if podOK && kjson.UnmarshalCaseSensitivePreserveInts(doc, &pod) == nil {
				_ = pod.Spec.Overhead.Cpu().Cmp(resource.MustParse("1"))
			}
		}()
		testwait.Receive(t, done, fmt.Sprintf("%.300q, passed by Check (ExtenderArgs %v, pod %v), to decode", doc, argsOK, podOK))
	})
}
