package podapi_test

import (
	"testing"

	"github.com/podfence/podfence/podapi"
)

func TestParseIsolation(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
		want podapi.Isolation
		err  string
	}{
		{name: "none", ann: map[string]string{"other": "x"}},
		{name: "podfence's", ann: map[string]string{podapi.AnnotationIRQLoadBalancing: "disable", podapi.AnnotationCPULoadBalancing: "disable"},
			want: podapi.Isolation{NoIRQs: true, NoLoadBalance: true}},
		{name: "CRI-O's", ann: map[string]string{podapi.CRIOIRQLoadBalancing: "disable"}, want: podapi.Isolation{NoIRQs: true}},
		{name: "CRI-O's deprecated true", ann: map[string]string{podapi.CRIOCPULoadBalancing: "true"}, want: podapi.Isolation{NoLoadBalance: true}},
		{name: "enable", ann: map[string]string{podapi.AnnotationIRQLoadBalancing: "enable"}},
		{name: "both agreeing", ann: map[string]string{podapi.AnnotationIRQLoadBalancing: "disable", podapi.CRIOIRQLoadBalancing: "true"},
			want: podapi.Isolation{NoIRQs: true}},
		{name: "both disagreeing", ann: map[string]string{podapi.AnnotationIRQLoadBalancing: "disable", podapi.CRIOIRQLoadBalancing: "enable"},
			err: `annotation irq-load-balancing.crio.io="enable": disagrees with podfence.io/irq-load-balancing="disable" (its alias): ` +
				`give one of them, or the same value in both`},
		{name: "bad value", ann: map[string]string{podapi.AnnotationCPULoadBalancing: "off"},
			err: `annotation podfence.io/cpu-load-balancing="off": want "disable" (or "enable", the same as leaving it out; ` +
				`CRI-O's deprecated "true" means "disable")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := podapi.ParseIsolation(tc.ann)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseIsolation(f *testing.F) {
	f.Add("disable", "true")
	f.Add("enable", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		got, err := podapi.ParseIsolation(map[string]string{podapi.AnnotationIRQLoadBalancing: a, podapi.CRIOIRQLoadBalancing: b,
			podapi.AnnotationCPULoadBalancing: b})
		if err == nil && got.NoIRQs != (a == "disable" || a == "true") {
			t.Errorf("%q/%q: %+v", a, b, got)
		}
	})
}
