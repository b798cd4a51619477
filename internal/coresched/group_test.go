package coresched

import (
	"testing"
)

func TestGroupFor(t *testing.T) {
	pod := func(ns string, labels ...string) Pod {
		l := map[string]string{}
		for i := 0; i < len(labels); i += 2 {
			l[labels[i]] = labels[i+1]
		}
		return Pod{UID: "uid1", Namespace: ns, Labels: l}
	}
	for _, tc := range []struct {
		name     string
		def      DefaultGroup
		pod      Pod
		id       string
		explicit bool
		err      string
	}{
		{name: "unlabelled: namespace by default", pod: pod("shop"), id: "ns:shop"},
		{name: "unlabelled: pod alone", def: ByPod, pod: pod("shop"), id: "pod:uid1"},
		{name: "unlabelled: no group", def: NoGroup, pod: pod("shop"), id: ""},
		{name: "group label", pod: pod("shop", LabelGroup, "tenant-a"), id: "group:tenant-a", explicit: true},
		{name: "Koordinator group label", pod: pod("shop", KoordLabelGroup, "tenant-b"), id: "group:tenant-b", explicit: true},
		{name: "podfence's label wins", pod: pod("shop", LabelGroup, "a", KoordLabelGroup, "b"), id: "group:a", explicit: true},
		{name: "exclusive overrides the group", pod: pod("shop", LabelGroup, "a", LabelPolicy, "exclusive"), id: "pod:uid1", explicit: true},
		{name: "Koordinator exclusive", pod: pod("shop", KoordLabelPolicy, "exclusive"), id: "pod:uid1", explicit: true},
		{name: "none: cookie 0", def: ByPod, pod: pod("shop", LabelGroup, "a", LabelPolicy, "none"), id: "", explicit: true},
		{name: "podfence's policy wins", pod: pod("shop", LabelPolicy, "", KoordLabelPolicy, "none"), id: "ns:shop"},
		{name: "unknown policy", pod: pod("shop", KoordLabelPolicy, "strict"),
			err: `label koordinator.sh/core-sched-policy="strict": unknown policy (want "exclusive", "none" or empty)`},
		{name: "bad group name", pod: pod("shop", LabelGroup, "a b"),
			err: `label podfence.io/core-sched-group="a b": group name has the character ' ' (want letters, digits, '-', '_' or '.')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := GroupFor(tc.def, tc.pod)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.ID() != tc.id || g.Explicit() != tc.explicit || g.None() != (tc.id == "") {
				t.Errorf("group = %q explicit=%v, want %q explicit=%v", g.ID(), g.Explicit(), tc.id, tc.explicit)
			}
		})
	}
}

func TestParseDefaultGroup(t *testing.T) {
	for in, want := range map[string]DefaultGroup{"": ByNamespace, "namespace": ByNamespace, "pod": ByPod, "none": NoGroup} {
		if got, err := ParseDefaultGroup(in); err != nil || got != want {
			t.Errorf("ParseDefaultGroup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDefaultGroup("node"); err == nil || err.Error() != `defaultGroup "node": want namespace, pod or none` {
		t.Errorf("err = %v", err)
	}
}

func FuzzGroupFor(f *testing.F) {
	f.Add("tenant", "", "", "exclusive")
	f.Fuzz(func(t *testing.T, group, policy, kgroup, kpolicy string) {
		labels := map[string]string{LabelGroup: group, LabelPolicy: policy, KoordLabelGroup: kgroup, KoordLabelPolicy: kpolicy}
		g, err := GroupFor(ByNamespace, Pod{UID: "u", Namespace: "n", Labels: labels})
		if err == nil && !g.None() && g.ID() == "" {
			t.Fatal("a group without an ID")
		}
	})
}
