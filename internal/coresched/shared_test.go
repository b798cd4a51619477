package coresched

import (
	"reflect"
	"testing"
)

// TestSharedGroupsZero: the zero value shares nothing: every labelled group is its
// namespace's, and there is nothing to list.
func TestSharedGroupsZero(t *testing.T) {
	var s SharedGroups
	if s.Joins("web", "shop") || s.Joins("", "shop") || s.Joins("", "") {
		t.Error("the zero SharedGroups shares a group")
	}
	if ns, every, ok := s.Sharers("web"); ns != nil || every || ok {
		t.Errorf("Sharers(web) = %v, %v, %v", ns, every, ok)
	}
	if s.Len() != 0 || s.String() != "" || s.Map() != nil {
		t.Errorf("Len %d, String %q, Map %v", s.Len(), s.String(), s.Map())
	}
}

// TestSharedGroupsShare: Share on the zero value, the union of repeated profiles, and a profile
// without namespaces sharing with every namespace (whatever other profiles of the group list).
func TestSharedGroupsShare(t *testing.T) {
	var s SharedGroups
	s.Share("tenant-a", "a2", "a")
	s.Share("tenant-a", "a", "a3") // again: the union, once each
	s.Share("telco", "dataplane")
	s.Share("web", "shop")
	s.Share("web") // a profile without namespaces: every namespace
	for _, tc := range []struct {
		group, ns string
		joins     bool
	}{
		{"tenant-a", "a", true}, {"tenant-a", "a2", true}, {"tenant-a", "a3", true},
		{"tenant-a", "b", false}, {"tenant-a", "", false}, {"tenant-a", "dataplane", false},
		{"telco", "dataplane", true}, {"telco", "a", false},
		{"web", "shop", true}, {"web", "anything", true},
		{"other", "a", false}, {"other", "dataplane", false}, // a name nobody shares
	} {
		if got := s.Joins(tc.group, tc.ns); got != tc.joins {
			t.Errorf("Joins(%s, %s) = %v, want %v", tc.group, tc.ns, got, tc.joins)
		}
	}
	if s.Len() != 3 {
		t.Errorf("Len() = %d, want 3", s.Len())
	}
	if got, want := s.String(), "telco=dataplane tenant-a=a,a2,a3 web=*"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	want := map[string][]string{"tenant-a": {"a", "a2", "a3"}, "telco": {"dataplane"}, "web": {"*"}}
	if got := s.Map(); !reflect.DeepEqual(got, want) {
		t.Errorf("Map() = %v, want %v", got, want)
	}
	if ns, every, ok := s.Sharers("web"); ns != nil || !every || !ok {
		t.Errorf("Sharers(web) = %v, %v, %v; want every", ns, every, ok)
	}
	if ns, every, ok := s.Sharers("telco"); !reflect.DeepEqual(ns, []string{"dataplane"}) || every || !ok {
		t.Errorf("Sharers(telco) = %v, %v, %v", ns, every, ok)
	}
}

// TestSharedGroupsReadOnly: what Sharers and Map return is the caller's: changing it does not
// change who shares a group.
func TestSharedGroupsReadOnly(t *testing.T) {
	var s SharedGroups
	s.Share("tenant-a", "a", "b")
	ns, _, _ := s.Sharers("tenant-a")
	m := s.Map()
	if len(ns) != 2 || len(m["tenant-a"]) != 2 {
		t.Fatalf("Sharers(tenant-a) = %v, Map() = %v; want a, b", ns, m)
	}
	ns[0] = "evil"
	m["tenant-a"][1] = "evil"
	if s.Joins("tenant-a", "evil") || !s.Joins("tenant-a", "a") || !s.Joins("tenant-a", "b") {
		t.Errorf("a caller changed the shared group: %s", s)
	}
}

// TestGroupForShared: which pods end up in the same group once the operator shares names:
// the shared group for its namespaces only, the namespace's own group for the rest, and
// policies and node defaults as without sharing.
func TestGroupForShared(t *testing.T) {
	var s SharedGroups
	s.Share("tenant-a", "a", "a2")
	s.Share("web")
	for _, tc := range []struct {
		def    DefaultGroup
		ns     string
		labels map[string]string
		id     string
	}{
		{ns: "a", labels: map[string]string{LabelGroup: "tenant-a"}, id: "group:tenant-a"},
		{ns: "a2", labels: map[string]string{KoordLabelGroup: "tenant-a"}, id: "group:tenant-a"},
		{ns: "b", labels: map[string]string{LabelGroup: "tenant-a"}, id: "group:b/tenant-a"},
		{ns: "b", labels: map[string]string{LabelGroup: "web"}, id: "group:web"},
		{ns: "a", labels: map[string]string{LabelGroup: "tenant-b"}, id: "group:a/tenant-b"},
		{ns: "a", labels: map[string]string{LabelGroup: "tenant-a", LabelPolicy: "exclusive"}, id: "pod:u"},
		{ns: "a", labels: map[string]string{LabelGroup: "tenant-a", LabelPolicy: "none"}, id: ""},
		{ns: "a", labels: nil, id: "ns:a"},
		{def: ByPod, ns: "a", labels: nil, id: "pod:u"},
		{def: NoGroup, ns: "a", labels: map[string]string{LabelGroup: ""}, id: ""},
	} {
		g, err := GroupFor(tc.def, s, Pod{UID: "u", Namespace: tc.ns, Labels: tc.labels})
		explicit := len(tc.labels) > 0 && tc.labels[LabelGroup]+tc.labels[KoordLabelGroup]+tc.labels[LabelPolicy] != ""
		if err != nil || g.ID() != tc.id || g.None() != (tc.id == "") || g.Explicit() != explicit {
			t.Errorf("%s %v (default %q): group %q explicit=%v, %v; want %q explicit=%v",
				tc.ns, tc.labels, tc.def, g.ID(), g.Explicit(), err, tc.id, explicit)
		}
	}
	// a group shared under the empty name does not capture unlabelled pods
	var empty SharedGroups
	empty.Share("")
	if g, err := GroupFor(ByNamespace, empty, Pod{UID: "u", Namespace: "a"}); err != nil || g.ID() != "ns:a" || g.Explicit() {
		t.Errorf("unlabelled pod with a shared empty name: %q explicit=%v, %v", g.ID(), g.Explicit(), err)
	}
}
