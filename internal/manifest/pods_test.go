package manifest

import (
	"strings"
	"testing"
)

func TestReadPods(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		pods     []string
		err      string
	}{
		{name: "two documents and an empty one",
			in: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: " +
				"Pod\nmetadata: {name: b, namespace: x}\n",
			pods: []string{"/a", "x/b"}},
		{name: "JSON", in: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}}`, pods: []string{"/j"}},
		{name: "not a pod", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			err: `in.yaml: document 1: kind "Deployment" apiVersion "apps/v1": want kind Pod, apiVersion v1`},
		{name: "unknown field", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containerz: []}\n",
			err: `in.yaml: document 1 (pod): error unmarshaling JSON: while decoding JSON: json: unknown field "containerz"`},
		{name: "no name", in: "apiVersion: v1\nkind: Pod\nmetadata: {}\n",
			err: "in.yaml: document 1: field metadata.name is empty: a pod needs a name"},
		{name: "bad YAML", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", err: "in.yaml: document 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods, err := ReadPods(strings.NewReader(tc.in), "in.yaml")
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("err = %v, want prefix %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			if strings.Join(names, " ") != strings.Join(tc.pods, " ") {
				t.Errorf("pods %v, want %v", names, tc.pods)
			}
		})
	}
}

// FuzzReadPods: any input gives pods with names, or an error naming the source; no panic.
func FuzzReadPods(f *testing.F) {
	f.Add("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - {name: c, resources: {limits: {podfence.io/x: \"1\"}}}\n")
	f.Add("---\n---\n")
	f.Add(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"}}`)
	f.Fuzz(func(t *testing.T, in string) {
		pods, err := ReadPods(strings.NewReader(in), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error does not name the source: %v", err)
			}
			return
		}
		for _, p := range pods {
			if p.Name == "" {
				t.Fatal("pod without a name accepted")
			}
		}
	})
}
