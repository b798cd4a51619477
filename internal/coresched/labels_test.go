package coresched

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// groupOf is GroupFor with the default grouping and no shared groups, for a pod of namespace
// shop with the given labels (key, value, key, value, ...).
func groupOf(t *testing.T, labels ...string) (Group, error) {
	t.Helper()
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return GroupFor(ByNamespace, SharedGroups{}, Pod{UID: "uid1", Namespace: "shop", Labels: l})
}

// TestGroupNameAccepted: the names a group label may carry: letters, digits, '-', '_' and '.',
// up to 63 characters (a Kubernetes label value). Each character class is tested at both ends
// of its range.
func TestGroupNameAccepted(t *testing.T) {
	for _, name := range []string{
		"a", "z", "A", "Z", "0", "9", "az", "AZ", "09", "Zz0",
		"a-b", "a_b", "a.b", "tenant-a.batch_1",
		strings.Repeat("a", 62),
		strings.Repeat("x", 63), // the longest label value
		"a" + strings.Repeat("-_.", 20) + "z",
	} {
		for _, key := range []string{LabelGroup, KoordLabelGroup} {
			g, err := groupOf(t, key, name)
			if err != nil {
				t.Errorf("%s=%q (%d characters): %v", key, name, len(name), err)
				continue
			}
			if want := "group:shop/" + name; g.ID() != want || !g.Explicit() {
				t.Errorf("%s=%q: group %q explicit=%v, want %q explicit", key, name, g.ID(), g.Explicit(), want)
			}
		}
	}
}

// TestGroupNameRefused: a group name with any other character, or longer than 63 characters,
// is refused; the message names the label (podfence's or Koordinator's), the value, what is
// wrong and what is allowed.
func TestGroupNameRefused(t *testing.T) {
	const allowed = `(want letters, digits, '-', '_' or '.')`
	for _, tc := range []struct {
		name, why string
	}{
		// the neighbours of each allowed range and character
		{"a`b", "has the character '`'"}, // just below 'a'
		{"a{b", "has the character '{'"}, // just above 'z'
		{"A@B", "has the character '@'"}, // just below 'A'
		{"A[B", "has the character '['"}, // just above 'Z'
		{"0/1", "has the character '/'"}, // just below '0'; would also make IDs ambiguous
		{"0:1", "has the character ':'"}, // just above '9'
		{"a,b", "has the character ','"}, // just below '-'
		{"a+b", "has the character '+'"},
		{"a^b", "has the character '^'"}, // just below '_'
		{"tenant a", "has the character ' '"},
		{"a\tb", "has the character '\\t'"},
		{"grüppe", "has the character 'ü'"},
		{"a*", "has the character '*'"},
		{"*", "has the character '*'"},
	} {
		for _, key := range []string{LabelGroup, KoordLabelGroup} {
			want := "label " + key + "=" + strconv.Quote(tc.name) + ": group name " + tc.why + " " + allowed
			_, err := groupOf(t, key, tc.name)
			if err == nil || err.Error() != want {
				t.Errorf("%s=%q: err = %v\nwant %s", key, tc.name, err, want)
			}
			var le *LabelError
			if !errors.As(err, &le) || le.Key != key || le.Value != tc.name {
				t.Errorf("%s=%q: not a LabelError naming the label and value: %#v", key, tc.name, err)
			}
		}
	}
	// Kubernetes label values start and end with a letter or digit; a profile could name
	// such a group, but no pod could carry it.
	for _, name := range []string{"-a", "a-", "_a", "a_", ".a", "a.", "-", "."} {
		want := "label " + LabelGroup + "=" + strconv.Quote(name) + ": group name " + strconv.Quote(name) +
			" starts or ends with '-', '_' or '.' (want a letter or digit at both ends)"
		if _, err := groupOf(t, LabelGroup, name); err == nil || err.Error() != want {
			t.Errorf("%q: err = %v\nwant %s", name, err, want)
		}
	}
	for _, n := range []int{64, 65, 100} {
		name := strings.Repeat("a", n)
		want := "label " + LabelGroup + "=" + strconv.Quote(name) + ": group name is " + strconv.Itoa(n) + " characters long (at most 63)"
		if _, err := groupOf(t, LabelGroup, name); err == nil || err.Error() != want {
			t.Errorf("%d characters: err = %v\nwant %s", n, err, want)
		}
	}
}

// TestGroupLabelPrecedence: podfence's labels win over Koordinator's when both are set, even
// when podfence's is empty; an error names the label the value was read from.
func TestGroupLabelPrecedence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels []string
		id     string
		err    string
	}{
		{name: "an empty podfence group hides Koordinator's", labels: []string{LabelGroup, "", KoordLabelGroup, "b"}, id: "ns:shop"},
		{name: "podfence's bad group is refused though Koordinator's is fine",
			labels: []string{LabelGroup, "a b", KoordLabelGroup, "b"},
			err:    `label podfence.io/core-sched-group="a b": group name has the character ' ' (want letters, digits, '-', '_' or '.')`},
		{name: "Koordinator's bad group is not read when podfence's is set",
			labels: []string{LabelGroup, "a", KoordLabelGroup, "b c"}, id: "group:shop/a"},
		{name: "podfence's policy wins over Koordinator's",
			labels: []string{LabelPolicy, "none", KoordLabelPolicy, "exclusive"}, id: ""},
		{name: "podfence's bad policy is refused though Koordinator's is fine",
			labels: []string{LabelPolicy, "Exclusive", KoordLabelPolicy, "exclusive"},
			err:    `label podfence.io/core-sched-policy="Exclusive": unknown policy (want "exclusive", "none" or empty)`},
		{name: "Koordinator's policy with podfence's group", labels: []string{LabelGroup, "a", KoordLabelPolicy, "exclusive"}, id: "pod:uid1"},
		{name: "surrounding blanks are ignored", labels: []string{LabelGroup, " tenant ", LabelPolicy, " "}, id: "group:shop/tenant"},
	} {
		g, err := groupOf(t, tc.labels...)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: err = %v, want %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || g.ID() != tc.id {
			t.Errorf("%s: group %q, %v; want %q", tc.name, g.ID(), err, tc.id)
		}
	}
}

// TestPolicyIgnoresGroupName: with policy exclusive or none the group label does not count,
// so its value is not checked either.
func TestPolicyIgnoresGroupName(t *testing.T) {
	for policy, id := range map[string]string{PolicyExclusive: "pod:uid1", PolicyNone: ""} {
		g, err := groupOf(t, LabelPolicy, policy, LabelGroup, "not a name")
		if err != nil || g.ID() != id || !g.Explicit() {
			t.Errorf("policy %s: group %q explicit=%v, %v; want %q explicit", policy, g.ID(), g.Explicit(), err, id)
		}
	}
	r, err := RequestOf(map[string]string{KoordLabelPolicy: PolicyExclusive, KoordLabelGroup: "x y"})
	if err != nil || r != (Request{PolicyKey: KoordLabelPolicy, Policy: PolicyExclusive, GroupKey: KoordLabelGroup, Group: "x y"}) {
		t.Errorf("RequestOf = %+v, %v", r, err)
	}
}

// TestRequestOf: the request names the key each value was read from.
func TestRequestOf(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   Request
	}{
		{labels: nil, want: Request{PolicyKey: KoordLabelPolicy, GroupKey: KoordLabelGroup}},
		{labels: map[string]string{LabelGroup: "g", KoordLabelPolicy: "none"},
			want: Request{PolicyKey: KoordLabelPolicy, Policy: PolicyNone, GroupKey: LabelGroup, Group: "g"}},
		{labels: map[string]string{LabelPolicy: "", KoordLabelGroup: "k"},
			want: Request{PolicyKey: LabelPolicy, GroupKey: KoordLabelGroup, Group: "k"}},
		{labels: map[string]string{KoordLabelPolicy: " strict ", KoordLabelGroup: "k"},
			want: Request{PolicyKey: KoordLabelPolicy, GroupKey: KoordLabelGroup, Group: "k", UnknownPolicy: "strict"}},
		{labels: map[string]string{LabelPolicy: "", KoordLabelPolicy: "strict"},
			want: Request{PolicyKey: LabelPolicy, GroupKey: KoordLabelGroup}},
	} {
		if got, err := RequestOf(tc.labels); err != nil || got != tc.want {
			t.Errorf("RequestOf(%v) = %+v, %v; want %+v", tc.labels, got, err, tc.want)
		}
	}
}

// TestGroupString: a group prints as its ID, the zero group as "none".
func TestGroupString(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{labels: nil, want: "ns:shop"},
		{labels: []string{LabelGroup, "web"}, want: "group:shop/web"},
		{labels: []string{LabelPolicy, "exclusive"}, want: "pod:uid1"},
		{labels: []string{LabelPolicy, "none"}, want: "none"},
	} {
		g, err := groupOf(t, tc.labels...)
		if err != nil || g.String() != tc.want {
			t.Errorf("%v: String() = %q, %v; want %q", tc.labels, g.String(), err, tc.want)
		}
	}
	if got := (Group{}).String(); got != "none" {
		t.Errorf("zero Group: %q", got)
	}
}

// TestDefaultGroupFlag: --coresched-default-group takes namespace, pod, node or none (empty:
// namespace) and leaves the value alone on a bad one.
func TestDefaultGroupFlag(t *testing.T) {
	d := ByPod
	for in, want := range map[string]DefaultGroup{"none": NoGroup, "namespace": ByNamespace, "pod": ByPod, "node": ByNode, "": ByNamespace} {
		if err := d.Set(in); err != nil || d != want || d.String() != string(want) {
			t.Errorf("Set(%q): %q, %v; want %q", in, d, err, want)
		}
	}
	d = NoGroup
	for _, in := range []string{"Pod", "Node", " pod", "cluster"} {
		if err := d.Set(in); err == nil || d != NoGroup {
			t.Errorf("Set(%q) = %v: value %q, want an error and none", in, err, d)
		}
	}
	if d.Type() != "namespace|pod|node|none" {
		t.Errorf("Type() = %q", d.Type())
	}
}

// TestParsePolicy: the node policy for pods a node cannot give a cookie: strict (the default)
// or best-effort.
func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"": Strict, "strict": Strict, "best-effort": BestEffort} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Strict", "besteffort", "none", "exclusive"} {
		want := `core scheduling policy "` + in + `": want strict or best-effort`
		if got, err := ParsePolicy(in); err == nil || err.Error() != want || got != "" {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %s", in, got, err, want)
		}
	}
	p := BestEffort
	if err := p.Set(""); err != nil || p != Strict {
		t.Errorf("Set(\"\"): %q, %v", p, err)
	}
	if err := p.Set("best-effort"); err != nil || p != BestEffort || p.String() != "best-effort" {
		t.Errorf("Set(best-effort): %q, %v", p, err)
	}
	if err := p.Set("lenient"); err == nil || p != BestEffort {
		t.Errorf("Set(lenient) = %v: value %q, want an error and best-effort", err, p)
	}
	if p.Type() != "strict|best-effort" {
		t.Errorf("Type() = %q", p.Type())
	}
}
