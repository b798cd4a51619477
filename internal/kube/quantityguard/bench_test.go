package quantityguard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kjson "sigs.k8s.io/json"
)

// atBound are the costliest texts Costly lets through, and the cheap common case: a
// mantissa of MaxLen characters, an exponent of MaxExponentDigits digits, and both.
func atBound() map[string]string {
	exp := strings.Repeat("9", MaxExponentDigits)
	long := strings.Repeat("9", MaxLen)
	return map[string]string{
		"plain":                  "500m",
		"exponent-":              "1e-" + exp,
		"exponent+":              "9e" + exp,
		"long":                   long,
		"long,exponent-":         long[:MaxLen-1] + "." + "e-" + exp,
		"long,exponent+":         long + "e" + exp,
		"long fraction,exponent": "0." + long[:MaxLen-2] + "e-" + exp,
		"long,binary suffix":     long + "Ei",
	}
}

// BenchmarkParseAtBound: what one quantity that passes the bounds costs to decode (the
// parse) and to use (MilliValue, Cmp), per value; "beyond" is the bound before (5 exponent
// digits) for comparison.
func BenchmarkParseAtBound(b *testing.B) {
	cases := atBound()
	cases["beyond: exponent 5 digits"] = "1e-99999"
	one := resource.MustParse("1")
	for name, s := range cases {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				q, err := resource.ParseQuantity(s)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = q.MilliValue(), q.Cmp(one)
			}
		})
	}
}

// BenchmarkWalk: Check on a pod with a 2.9 MB annotation and on a list of 1,000 nodes with
// labels, images and capacities, against the first walk (on encoding/json's Decoder) and
// against decoding the document, which Check precedes.
func BenchmarkWalk(b *testing.B) {
	pod := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}}}}}
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2_900_000)}
	nodes := corev1.NodeList{Items: make([]corev1.Node, 1000)}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.Name, n.Labels = fmt.Sprintf("node-%d", i), map[string]string{}
		for j := range 20 {
			n.Labels[fmt.Sprintf("example.com/label-%d", j)] = "value"
		}
		n.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi"),
			"pods": resource.MustParse("110")}
		n.Status.Allocatable = n.Status.Capacity
		for j := range 50 {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: 1 << 20,
				Names: []string{fmt.Sprintf("registry.example.com/team/image-%d@sha256:%064d", j, j)}})
		}
	}
	for _, doc := range []struct {
		name string
		v    any
		s    *Shape
	}{{"pod", &pod, For[corev1.Pod]()}, {"nodes", &nodes, For[corev1.NodeList]()}} {
		raw, err := json.Marshal(doc.v)
		if err != nil {
			b.Fatal(err)
		}
		visit := func(string, []byte) error { return nil }
		for _, bc := range []struct {
			name string
			f    func() error
		}{
			{"Walk", func() error { return Walk(raw, doc.s, visit) }},
			{"Decoder walk", func() error { return refWalk(raw, doc.s, visit) }},
			{"decode", func() error { return kjson.UnmarshalCaseSensitivePreserveInts(raw, doc.v) }},
		} {
			b.Run(doc.name+"/"+bc.name, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if err := bc.f(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
