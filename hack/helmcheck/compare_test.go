package main

import (
	"bytes"
	"strings"
	"testing"
)

// A small kustomize rendering: what kustomize writes (a generated ConfigMap with its hash,
// a namespace on a cluster-scoped policy, a folded CEL expression turned literal).
const kustomized = `apiVersion: v1
kind: ConfigMap
metadata:
  name: sched-config-7h2kd5b8tm
  namespace: ns
  labels: {app.kubernetes.io/part-of: podfence}
data:
  config.yaml: |
    # a comment kustomize keeps
    profiles: [{schedulerName: s}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns, labels: {app.kubernetes.io/part-of: podfence}}
spec:
  template:
    metadata: {labels: {app: d}}
    spec:
      containers:
        - name: c
          args: [--a=1, --b=2]
      volumes:
        - {name: config, configMap: {name: sched-config-7h2kd5b8tm}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p, namespace: ns}
spec:
  validations:
    - expression: |-
        a &&

          b
`

// The chart's rendering of the same objects, with Helm's labels and checksum.
const charted = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: p
  labels: {helm.sh/chart: podfence-0.1.0, app.kubernetes.io/managed-by: Helm}
spec:
  validations:
    - expression: >-
        a &&
          b
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: sched-config
  namespace: ns
  labels: {app.kubernetes.io/part-of: podfence, app.kubernetes.io/instance: r}
data:
  config.yaml: |
    profiles:
      - schedulerName: s
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns, labels: {app.kubernetes.io/part-of: podfence, app.kubernetes.io/version: "1"}}
spec:
  template:
    metadata:
      labels: {app: d, app.kubernetes.io/instance: r}
      annotations: {checksum/config: abc}
    spec:
      containers:
        - name: c
          args: [--a=1, --b=2]
      volumes:
        - {name: config, configMap: {name: sched-config}}
`

func mustParse(t *testing.T, s string) []Object {
	t.Helper()
	objs, err := ParseObjects([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestCompareEqualAfterNormalising: the two renderings above differ only in what Compare
// normalises, so it finds every object equal.
func TestCompareEqualAfterNormalising(t *testing.T) {
	r := Compare(mustParse(t, kustomized), mustParse(t, charted), Options{})
	var out bytes.Buffer
	r.Print(&out)
	if !r.OK() || r.Matched != 3 {
		t.Errorf("Compare: ok %v, %d matched, want ok and 3:\n%s", r.OK(), r.Matched, out.String())
	}
}

// TestCompareReportsObjectAndField: each change to the chart's side is reported as the
// object and the field, with both values.
func TestCompareReportsObjectAndField(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           string
	}{
		{name: "an arg", old: "--b=2", new: "--b=3",
			want: `Deployment.apps ns/d: spec.template.spec.containers[c].args[1]: kustomize "--b=2", chart "--b=3"`},
		{name: "an arg more", old: "[--a=1, --b=2]", new: "[--a=1, --b=2, --c]",
			want: `Deployment.apps ns/d: spec.template.spec.containers[c].args[2]: kustomize (absent), chart "--c"`},
		{name: "a podfence label", old: "{app: d, app.kubernetes.io/instance: r}", new: "{app: e}",
			want: `Deployment.apps ns/d: spec.template.metadata.labels.app: kustomize "d", chart "e"`},
		{name: "a ConfigMap's YAML content", old: "schedulerName: s", new: "schedulerName: t",
			want: `ConfigMap ns/sched-config: data[config.yaml].profiles[0].schedulerName: kustomize "s", chart "t"`},
		{name: "a CEL token", old: "    a &&\n", new: "    a ||\n",
			want: `ValidatingAdmissionPolicy.admissionregistration.k8s.io p: spec.validations[0].expression: kustomize "a \u0026\u0026 b", chart "a || b"`},
		{name: "a Helm-like annotation podfence did not ask for", old: "{checksum/config: abc}", new: "{podfence.io/x: z}",
			want: `Deployment.apps ns/d: spec.template.metadata.annotations: kustomize (absent), chart {"podfence.io/x":"z"}`},
		{name: "a missing object", old: "kind: Deployment\nmetadata: {name: d,", new: "kind: Deployment\nmetadata: {name: e,",
			want: "Deployment.apps ns/d: in the kustomize base, not in the chart\nDeployment.apps ns/e: in the chart, not in the kustomize base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(charted, tc.old) {
				t.Fatalf("the chart's rendering has no %q", tc.old)
			}
			got := strings.Replace(charted, tc.old, tc.new, 1)
			r := Compare(mustParse(t, kustomized), mustParse(t, got), Options{})
			var out bytes.Buffer
			r.Print(&out)
			if r.OK() || strings.TrimSpace(out.String()) != tc.want {
				t.Errorf("ok %v, report:\n%s\nwant:\n%s", r.OK(), out.String(), tc.want)
			}
		})
	}
}

// TestCompareAllowsNamedObjects: objects one side alone has pass only when named.
func TestCompareAllowsNamedObjects(t *testing.T) {
	extra := charted + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: ca, namespace: ns}\n"
	if r := Compare(mustParse(t, kustomized), mustParse(t, extra), Options{}); r.OK() || len(r.Extra) != 1 {
		t.Errorf("an unnamed extra Secret: ok %v, extra %v", r.OK(), r.Extra)
	}
	if r := Compare(mustParse(t, kustomized), mustParse(t, extra), Options{ChartOnly: []string{"Secret ca"}}); !r.OK() {
		t.Errorf("the named extra Secret: %+v", r)
	}
	if r := Compare(mustParse(t, extra), mustParse(t, charted), Options{KustomizeOnly: []string{"Secret ca"}}); !r.OK() {
		t.Errorf("the named missing Secret: %+v", r)
	}
}

func TestParseObjects(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
		keys          []string
	}{
		{name: "empty documents and comments skipped", in: "---\n# c\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns1, namespace: x}\n---\n",
			keys: []string{"Namespace ns1"}},
		{name: "group without version", in: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: ns}\n",
			keys: []string{"Role.rbac.authorization.k8s.io ns/r"}},
		{name: "no kind", in: "apiVersion: v1\nmetadata: {name: a}\n", err: "document 1: field kind: missing"},
		{name: "no name", in: "apiVersion: v1\nkind: Pod\nmetadata: {}\n", err: "document 1: Pod: field metadata.name: missing"},
		{name: "twice", in: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
			err: "document 2: Pod a again (first in document 1)"},
		{name: "not YAML", in: "apiVersion: [\n", err: "document 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ParseObjects([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q…", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Key.String())
			}
			if strings.Join(keys, ";") != strings.Join(tc.keys, ";") {
				t.Errorf("keys %q, want %q", keys, tc.keys)
			}
		})
	}
}

// FuzzParseObjects: any input either parses into objects that each have a kind and a
// name, or is refused with an error; it never panics.
func FuzzParseObjects(f *testing.F) {
	f.Add([]byte(kustomized))
	f.Add([]byte(charted))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: [x]}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		objs, err := ParseObjects(in)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.Key.Kind == "" || o.Key.Name == "" {
				t.Fatalf("object without kind or name: %+v", o.Key)
			}
		}
	})
}
