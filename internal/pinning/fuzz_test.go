package pinning

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
	"github.com/podfence/podfence/podapi"
)

// FuzzParse checks that Parse never panics, that every error is an *AnnotationError naming
// the key, that what it accepts round-trips through Encode, and that Plan on it never
// panics and never gives one CPU to two exclusive processes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		cpuPoolerExample, twoExclusiveAndDefault, ``, `[]`, `null`, `[{}]`, `[{"container": "a"}]`,
		`[{"container": "a", "processes": [{"pool": "shared_s", "cpus": "250"}]}]`,
		`[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpus": 1.5}]}]`,
		`[{"container": "a", "processes": [{"process": "x", "pool": "default", "cpus": null, "args": null}]}]`,
		`[{"container": "a", "processes": [{"process": "x", "pool": "exclusive_a", "cpus": 1e3}]}] x`,
	} {
		f.Add(s)
	}
	exclusive, shared := cpuset.New(0, 1, 2, 3, 64, 65), cpuset.New(8, 9)
	f.Fuzz(func(t *testing.T, value string) {
		spec, err := Parse(Key, value)
		if err != nil {
			var ae *podapi.AnnotationError
			if !errors.As(err, &ae) || ae.Key != Key || ae.Value != value || !strings.HasPrefix(err.Error(), "annotation "+Key+"=") {
				t.Fatalf("error is not an *AnnotationError naming the key and value: %v", err)
			}
			return
		}
		again, err := Parse(Key, Encode(spec.Containers...))
		if err != nil || !reflect.DeepEqual(again.Containers, spec.Containers) {
			t.Fatalf("Parse(Encode(spec)) = %+v, %v; want %+v", again, err, spec)
		}
		for _, c := range spec.Containers {
			assign, err := Plan(c.Processes, exclusive, shared)
			if err != nil {
				continue
			}
			seen := cpuset.New()
			for _, a := range assign {
				if a.Process.Type() != allocation.TypeExclusive {
					continue
				}
				if a.CPUs.Size() != a.Process.CPUs || !a.CPUs.Intersection(seen).IsEmpty() || !a.CPUs.IsSubsetOf(exclusive) {
					t.Fatalf("container %q: exclusive process got %s (asked %d; already given %s)", c.Name, a.CPUs, a.Process.CPUs, seen)
				}
				seen = seen.Union(a.CPUs)
			}
		}
	})
}
