package manifest

import (
	"strings"
	"testing"
)

func TestCheckResources(t *testing.T) {
	const full = `{requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}`
	ds := func(init, main string) string {
		return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n" +
			"      initContainers: [{name: i, image: x, resources: " + init + "}]\n" +
			"      containers: [{name: c, image: x, resources: " + main + "}]\n"
	}
	for _, tc := range []struct{ name, doc, err string }{
		{"all set", ds(full, full), ""},
		{"init without any", ds(`{}`, full), "DaemonSet d: init container i: no resources.requests.cpu"},
		{"no memory limit", ds(full, `{requests: {cpu: 1m, memory: 1Mi}, limits: {cpu: "1"}}`),
			"DaemonSet d: container c: no resources.limits.memory"},
		{"no memory request", ds(full, `{requests: {cpu: 1m}, limits: {memory: 1Mi}}`), "DaemonSet d: container c: no resources.requests.memory"},
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  template:\n    spec:\n" +
			"      containers: [{name: s, image: x}]\n", "Deployment w: container s: no resources.requests.cpu"},
		{"pod", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: s, image: x, resources: " + full + "}]\n", ""},
		{"other kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckResources([]byte(tc.doc))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)) {
				t.Errorf("CheckResources = %v, want %q", err, tc.err)
			}
		})
	}
}
