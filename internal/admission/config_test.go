package admission

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseProfiles(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		err        string
	}{
		{name: "empty file: no profiles", yaml: ""},
		{name: "a group and a policy", yaml: "- {group: g}\n- {policy: none, namespaces: [a]}\n"},
		{name: "not a list", yaml: "group: g\n",
			err: "core-scheduling profiles p.yaml: want a YAML list of {name, namespaces, podSelector, group, policy}: error " +
				"unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go value of type []admission.Profile"},
		{name: "unknown field", yaml: "- {group: g, groups: [h]}\n",
			err: `core-scheduling profiles p.yaml: want a YAML list of {name, namespaces, podSelector, group, policy}: error ` +
				`unmarshaling JSON: while decoding JSON: json: unknown field "groups"`},
		{name: "namespaceSelector", yaml: "- name: sel\n  namespaceSelector: {matchLabels: {team: a}}\n  group: g\n",
			err: "core-scheduling profiles p.yaml: profile 0 (sel): namespaceSelector is not supported: the webhook sees the pod, not " +
				"its namespace's labels; list the namespaces by name in namespaces"},
		{name: "neither group nor policy", yaml: "- {group: g}\n- {namespaces: [a]}\n",
			err: "core-scheduling profiles p.yaml: profile 1: sets neither group nor policy (want a group name, or policy exclusive or none)"},
		{name: "bad policy and bad group, both reported", yaml: "- {policy: strict}\n- {name: x, group: 'a b'}\n",
			err: `core-scheduling profiles p.yaml: profile 0: label podfence.io/core-sched-policy="strict": unknown policy (want ` +
				`"exclusive", "none" or empty)` + "\n" +
				`core-scheduling profiles p.yaml: profile 1 (x): label podfence.io/core-sched-group="a b": group name has the character ` +
				`' ' (want letters, digits, '-', '_' or '.')`},
		{name: "bad selector", yaml: "- group: g\n  podSelector: {matchExpressions: [{key: a, operator: Near}]}\n",
			err: `core-scheduling profiles p.yaml: profile 0: podSelector: "Near" is not a valid label selector operator`},
		{name: "empty namespace", yaml: "- {group: g, namespaces: ['']}\n",
			err: "core-scheduling profiles p.yaml: profile 0: namespaces: an empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProfiles("p.yaml", []byte(tc.yaml))
			if got := errText(err); got != tc.err {
				t.Errorf("error\n%s\nwant\n%s", got, tc.err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	poolDir := filepath.Join(dir, "pools")
	profiles := filepath.Join(dir, "profiles.yaml")
	write := func(path, data string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(poolDir, "poolconfig-dp.yaml"), poolsDP)
	write(filepath.Join(poolDir, "poolconfig-rt.yaml"), poolsRT)
	write(profiles, profilesYAML)
	cfg, err := Load(poolDir, profiles)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.knownPools(), []string{"exclusive_dp", "exclusive_rt", "shared_caas", "shared_web"}; !slices.Equal(got, want) {
		t.Errorf("known pools %v, want %v", got, want)
	}
	if len(cfg.Profiles) != 3 {
		t.Errorf("%d profiles, want 3", len(cfg.Profiles))
	}
	if cfg, err := Load("", ""); err != nil || len(cfg.Pools)+len(cfg.Profiles) != 0 {
		t.Errorf("no paths: %v, %v", cfg, err)
	}
	if _, err := Load("", filepath.Join(dir,
		"none.yaml")); errText(err) != "load core-scheduling profiles: open "+dir+"/none.yaml: no such file or directory" {
		t.Errorf("missing profiles: %v", err)
	}
	write(filepath.Join(poolDir, "poolconfig-bad.yaml"), "pools: {shared_a: {cpus: x}}\n")
	if _, err := Load(poolDir, ""); err == nil {
		t.Error("a bad pool config loads")
	}
}

// TestPoolNamesUnchecked: without pool configs any exclusive or shared name is accepted.
func TestPoolNamesUnchecked(t *testing.T) {
	pod := testPod("s", ctr("app", "podfence.io/exclusive_anything=1", "podfence.io/shared_x=10"))
	if err := Validate(applyMutation(t, pod, nil), nil); err != nil {
		t.Error(err)
	}
}

// applyMutation mutates pod with cfg and returns the patched pod.
func applyMutation(t *testing.T, pod *corev1.Pod, cfg *Config) *corev1.Pod {
	t.Helper()
	ops, _, err := Mutate(pod, cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return applyPatch(t, pod, patch)
}

// TestProfileNamespaces: a profile without namespaces gives its group to pods of every
// namespace; one with namespaces to pods of those only, and the first that matches wins.
func TestProfileNamespaces(t *testing.T) {
	ps, err := ParseProfiles("p.yaml", []byte("- {namespaces: [batch], policy: exclusive}\n- {group: everyone}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Profiles: ps}
	for ns, want := range map[string]map[string]string{
		"batch":   {"podfence.io/core-sched-policy": "exclusive"},
		"shop":    {"podfence.io/core-sched-group": "everyone"},
		"default": {"podfence.io/core-sched-group": "everyone"},
	} {
		if got := applyMutation(t, testPod(ns, ctr("app")), cfg).Labels; !maps.Equal(got, want) {
			t.Errorf("namespace %s: labels %v, want %v", ns, got, want)
		}
	}
}
