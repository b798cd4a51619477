package main

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		checked  bool
		err      string
	}{
		{name: "a valid Deployment", checked: true,
			in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec: {replicas: 2}\n"},
		{name: "an unknown field", checked: true, err: `as its API type: strict decoding error: unknown field "spec.replica"`,
			in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec: {replica: 2}\n"},
		{name: "a field of the wrong type", checked: true, err: "as its API type: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
			in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ns}\nspec: {replicas: two}\n"},
		{name: "another namespace", err: `metadata.namespace "other": want "ns"`,
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}\n"},
		{name: "no namespace", err: `metadata.namespace "": want "ns"`,
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"},
		{name: "a cluster-scoped object with a namespace", err: `metadata.namespace "ns" on a cluster-scoped ClusterRole: want none`,
			in: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r, namespace: ns}\n"},
		{name: "pool configs podfence reads", checked: true,
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: podfence-pools, namespace: ns}\ndata:\n  poolconfig-a.yaml: |\n    pools: {default: {cpus: \"0-1\"}}\n"},
		{name: "a pool config podfence refuses", checked: true, err: "data[poolconfig-a.yaml]: ",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: podfence-pools, namespace: ns}\ndata:\n  poolconfig-a.yaml: |\n    pools: {default: {cpus: \"1-0\"}}\n"},
		{name: "profiles podfence refuses", checked: true, err: "data[coresched-profiles.yaml]: core-scheduling profiles coresched-profiles.yaml",
			in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: podfence-coresched-profiles, namespace: ns}\ndata:\n  coresched-profiles.yaml: |\n    - {group: g, colour: red}\n"},
		{name: "a custom kind: its key only", checked: false,
			in: "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: c, namespace: ns}\nspec: {anything: 1}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Validate(mustParse(t, tc.in), "ns")
			if len(v) != 1 {
				t.Fatalf("%d results, want 1", len(v))
			}
			switch {
			case tc.err == "" && v[0].Err != nil, tc.err != "" && (v[0].Err == nil || !strings.HasPrefix(v[0].Err.Error(), tc.err)):
				t.Errorf("error %v, want %q", v[0].Err, tc.err)
			case tc.err == "" && v[0].Checked != tc.checked:
				t.Errorf("checked %v, want %v", v[0].Checked, tc.checked)
			}
		})
	}
}
