package quantityguard

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// visits lists what Walk (or refWalk) visits in doc, and its error.
func visits(walk func([]byte, *Shape, func(string, []byte) error) error, doc []byte, s *Shape) ([]string, error) {
	var out []string
	err := walk(doc, s, func(path string, text []byte) error {
		out = append(out, path+"="+string(text))
		return nil
	})
	return out, err
}

// FuzzWalk: Walk visits what the token-by-token walk on encoding/json's Decoder visits, in
// order, and fails where it fails, for ExtenderArgs and for a pod.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"cpu":"1","mem\u006fry":2}}}]}},"NodeNames":["a"]}`,
		`{"Nodes":{"items":[{"metadata":{"name":"a\"]}"},"status":{"capacity":{"c\\\"pu":"1e-999999999"},"images":[{"names":["x"]}]}}]}}`,
		`{"spec":{"overhead":{"cpu":"1","cpu":null,"x":[1,{"y":"}"}]},"containers":{"a":1},"volumes":[3,{"emptyDir":{"sizeLimit":1}}]}}`,
		`{"\u0073pec":{"overhead":{"\ud800":"1"}},"Spec":{"overhead":{"cpu":"1"}}}`,
		"{\"spec\":{\"overhead\":{\"\xff\":\"1\"}}}",
		`{"Pod":{}} x`, `{"Pod":{"spec":{}}`, ``, `  `, `null`, `[]`, `"x"`, `{"Pod":[{"spec":1}]}`,
	} {
		f.Add([]byte(s))
	}
	shapes := []*Shape{For[extenderv1.ExtenderArgs](), For[corev1.Pod]()}
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, s := range shapes {
			got, err := visits(Walk, doc, s)
			want, refErr := visits(refWalk, doc, s)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("%q: Walk error %v, the Decoder's %v", doc, err, refErr)
			}
			if err == nil && !slices.Equal(got, want) {
				t.Fatalf("%q: Walk visits\n%s\nthe Decoder's walk\n%s", doc, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	})
}
