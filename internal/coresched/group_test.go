package coresched

import (
	"strings"
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
		{name: "group label: the namespace's group", pod: pod("shop", LabelGroup, "tenant-a"), id: "group:shop/tenant-a", explicit: true},
		{name: "Koordinator group label", pod: pod("shop", KoordLabelGroup, "tenant-b"), id: "group:shop/tenant-b", explicit: true},
		{name: "podfence's label wins", pod: pod("shop", LabelGroup, "a", KoordLabelGroup, "b"), id: "group:shop/a", explicit: true},
		{name: "exclusive overrides the group", pod: pod("shop", LabelGroup, "a", LabelPolicy, "exclusive"), id: "pod:uid1", explicit: true},
		{name: "Koordinator exclusive", pod: pod("shop", KoordLabelPolicy, "exclusive"), id: "pod:uid1", explicit: true},
		{name: "none: cookie 0", def: ByPod, pod: pod("shop", LabelGroup, "a", LabelPolicy, "none"), id: "", explicit: true},
		{name: "podfence's policy wins", pod: pod("shop", LabelPolicy, "", KoordLabelPolicy, "none"), id: "ns:shop"},
		{name: "unlabelled: one group for the node", def: ByNode, pod: pod("shop"), id: "node"},
		{name: "node default: a labelled group stays its namespace's", def: ByNode, pod: pod("shop", KoordLabelGroup, "a"),
			id: "group:shop/a", explicit: true},
		{name: "unknown Koordinator policy reads as the default", pod: pod("shop", KoordLabelPolicy, "strict"), id: "ns:shop"},
		{name: "unknown Koordinator policy with a group", pod: pod("shop", KoordLabelPolicy, "Exclusive", KoordLabelGroup, "a"),
			id: "group:shop/a", explicit: true},
		{name: "unknown Koordinator policy, node default", def: ByNode, pod: pod("shop", KoordLabelPolicy, "x"), id: "node"},
		{name: "unknown Koordinator policy still checks the group", pod: pod("shop", KoordLabelPolicy, "x", KoordLabelGroup, "a b"),
			err: `label koordinator.sh/core-sched-group-id="a b": group name has the character ' ' (want letters, digits, '-', '_' or '.')`},
		{name: "unknown podfence policy is refused", pod: pod("shop", LabelPolicy, "strict"),
			err: `label podfence.io/core-sched-policy="strict": unknown policy (want "exclusive", "none" or empty)`},
		{name: "bad group name", pod: pod("shop", LabelGroup, "a b"),
			err: `label podfence.io/core-sched-group="a b": group name has the character ' ' (want letters, digits, '-', '_' or '.')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := GroupFor(tc.def, SharedGroups{}, tc.pod)
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

// TestGroupScope: a group name is its namespace's unless the operator shares it, and then
// only among the namespaces that share it; Koordinator's label follows the same rule.
func TestGroupScope(t *testing.T) {
	var shared SharedGroups
	shared.Share("tenant-a", "a", "a2")
	shared.Share("tenant-a", "a3") // a second profile: the union
	shared.Share("everyone")       // no namespaces: every namespace
	id := func(ns, key, group string) string {
		t.Helper()
		g, err := GroupFor(ByNamespace, shared, Pod{UID: "u-" + ns, Namespace: ns, Labels: map[string]string{key: group}})
		if err != nil {
			t.Fatal(err)
		}
		if !g.Explicit() {
			t.Errorf("%s/%s: not explicit", ns, group)
		}
		return g.ID()
	}
	for _, tc := range []struct {
		name, a, b string
		same       bool
	}{
		{name: "same label in two namespaces", a: id("a", LabelGroup, "web"), b: id("b", LabelGroup, "web")},
		{name: "a shared group across its namespaces", a: id("a", LabelGroup, "tenant-a"), b: id("a2", LabelGroup, "tenant-a"), same: true},
		{name: "a namespace of a second profile", a: id("a", LabelGroup, "tenant-a"), b: id("a3", LabelGroup, "tenant-a"), same: true},
		{name: "a namespace outside the shared group", a: id("a", LabelGroup, "tenant-a"), b: id("b", LabelGroup, "tenant-a")},
		{name: "Koordinator's label outside the shared group", a: id("a", LabelGroup, "tenant-a"),
			b: id("b", KoordLabelGroup, "tenant-a")},
		{name: "Koordinator's label inside it", a: id("a", LabelGroup, "tenant-a"), b: id("a2", KoordLabelGroup, "tenant-a"), same: true},
		{name: "a group shared by every namespace", a: id("a", LabelGroup, "everyone"), b: id("z", LabelGroup, "everyone"), same: true},
		{name: "a namespaced group is not the namespace default", a: id("shop", LabelGroup, "x"), b: "ns:shop"},
	} {
		if (tc.a == tc.b) != tc.same {
			t.Errorf("%s: groups %q and %q, want same=%v", tc.name, tc.a, tc.b, tc.same)
		}
	}
	if got := id("b", LabelGroup, "tenant-a"); got != "group:b/tenant-a" {
		t.Errorf("outside: %q, want group:b/tenant-a", got)
	}
	if got := id("a2", LabelGroup, "tenant-a"); got != "group:tenant-a" {
		t.Errorf("inside: %q, want group:tenant-a", got)
	}
	ns, every, ok := shared.Sharers("tenant-a")
	if !ok || every || strings.Join(ns, ",") != "a,a2,a3" {
		t.Errorf("Sharers(tenant-a) = %v, %v, %v", ns, every, ok)
	}
	if _, every, ok := shared.Sharers("everyone"); !ok || !every {
		t.Errorf("Sharers(everyone): every=%v ok=%v", every, ok)
	}
	if _, _, ok := shared.Sharers("web"); ok {
		t.Error("Sharers(web): a namespaced name is shared")
	}
	if got, want := shared.String(), "everyone=* tenant-a=a,a2,a3"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestParseDefaultGroup(t *testing.T) {
	for in, want := range map[string]DefaultGroup{"": ByNamespace, "namespace": ByNamespace, "pod": ByPod, "node": ByNode, "none": NoGroup} {
		if got, err := ParseDefaultGroup(in); err != nil || got != want {
			t.Errorf("ParseDefaultGroup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDefaultGroup("cluster"); err == nil || err.Error() != `defaultGroup "cluster": want namespace, pod, node or none` {
		t.Errorf("err = %v", err)
	}
}

func FuzzGroupFor(f *testing.F) {
	f.Add("tenant", "", "", "exclusive")
	f.Fuzz(func(t *testing.T, group, policy, kgroup, kpolicy string) {
		labels := map[string]string{LabelGroup: group, LabelPolicy: policy, KoordLabelGroup: kgroup, KoordLabelPolicy: kpolicy}
		var shared SharedGroups
		shared.Share(group, "n")
		g, err := GroupFor(ByNamespace, shared, Pod{UID: "u", Namespace: "n", Labels: labels})
		if err == nil && !g.None() && g.ID() == "" {
			t.Fatal("a group without an ID")
		}
	})
}
