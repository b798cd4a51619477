package coresched

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Koordinator's own test inputs and expected outputs (testdata/koordinator, each file names
// its source), run through podfence. A case podfence answers otherwise says why.

func readFixture(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "koordinator", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestKoordinatorPolicyLabels: koordlet's reading of koordinator.sh/core-sched-policy: none
// and exclusive, anything else the default policy; podfence reads the same and keeps the
// unknown value for its warning.
func TestKoordinatorPolicyLabels(t *testing.T) {
	var f struct {
		Cases []struct {
			Name    string
			Labels  map[string]string
			Policy  string
			Group   string
			Unknown bool
		}
	}
	readFixture(t, "policy-labels.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range f.Cases {
		r, err := RequestOf(tc.Labels)
		if err != nil {
			t.Errorf("%s: %v", tc.Name, err)
			continue
		}
		if r.Policy != tc.Policy || r.Group != tc.Group || (r.UnknownPolicy != "") != tc.Unknown {
			t.Errorf("%s: policy %q group %q unknown %q; koordlet: policy %q group %q unknown %v", tc.Name, r.Policy, r.Group,
				r.UnknownPolicy, tc.Policy, tc.Group, tc.Unknown)
		}
		if tc.Unknown && r.UnknownPolicy != tc.Labels[KoordLabelPolicy] {
			t.Errorf("%s: UnknownPolicy %q, want the label's value %q", tc.Name, r.UnknownPolicy, tc.Labels[KoordLabelPolicy])
		}
	}
}

type koordAnswer struct {
	Enabled bool
	Group   string
	Why     string
}

// TestKoordinatorPodEnabledAndGroup: koordlet's Test_isPodEnabled cases: whether a pod gets
// a cookie under a rule, and which group. podfence runs with the node-wide default group
// (koordlet's grouping) and the --coresched-qos value of each rule.
func TestKoordinatorPodEnabledAndGroup(t *testing.T) {
	var f struct {
		Rules map[string]string
		Cases []struct {
			Name, Rule, UID string
			Labels          map[string]string
			Koordinator     koordAnswer
			Podfence        *koordAnswer
		}
	}
	readFixture(t, "pod-enabled-and-group.json", &f)
	if len(f.Cases) != 12 {
		t.Fatalf("%d cases, want koordlet's 12", len(f.Cases))
	}
	for _, tc := range f.Cases {
		flag, ok := f.Rules[tc.Rule]
		if !ok {
			t.Fatalf("%s: no rule %q", tc.Name, tc.Rule)
		}
		qos, err := ParseQoS(flag)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.Koordinator
		if tc.Podfence != nil {
			if tc.Podfence.Why == "" {
				t.Errorf("%s: a difference without its reason", tc.Name)
			}
			want = *tc.Podfence
		}
		g, err := Rules{Default: ByNode, QoS: qos}.GroupOf(Pod{UID: tc.UID, Namespace: "ns", Labels: tc.Labels})
		if err != nil {
			t.Errorf("%s: %v", tc.Name, err)
			continue
		}
		got := koordAnswer{Enabled: !g.None(), Group: koordID(g.ID(), "ns")}
		if got.Enabled != want.Enabled || want.Enabled && got.Group != want.Group {
			t.Errorf("%s: enabled %v group %q (podfence %q); want enabled %v group %q", tc.Name, got.Enabled, got.Group, g.ID(),
				want.Enabled, want.Group)
		}
	}
}

// koordID writes a podfence group ID of a pod of namespace ns as koordlet's group id.
func koordID(id, ns string) string {
	base, expeller := strings.CutSuffix(id, ExpellerSuffix)
	switch {
	case base == "node":
		base = ""
	case strings.HasPrefix(base, "group:"+ns+"/"):
		base = strings.TrimPrefix(base, "group:"+ns+"/")
	case strings.HasPrefix(base, "pod:"):
		base = strings.TrimPrefix(base, "pod:")
	}
	if expeller {
		base += "-expeller"
	}
	return base
}

type koordParam struct {
	Enabled, Expeller, Idle bool
}

// TestKoordinatorRules: koordlet's rule parsing cases (Test_parseRuleForNodeSLO): the
// per-class params of a NodeSLO CPU QoS strategy equal the knobs of the --coresched-qos
// value given for it; and the cpu.idle koordlet sets per class.
func TestKoordinatorRules(t *testing.T) {
	var f struct {
		Cases []struct {
			Name, Flag string
			Want       map[QoSClass]koordParam
		}
		CPUIdle []struct {
			Name, Flag string
			Class      QoSClass
			CPUIdle    int
		}
	}
	readFixture(t, "rules.json", &f)
	if len(f.Cases) != 6 || len(f.CPUIdle) != 3 {
		t.Fatalf("%d rule cases and %d cpu.idle cases, want 6 and 3", len(f.Cases), len(f.CPUIdle))
	}
	for _, tc := range f.Cases {
		qos, err := ParseQoS(tc.Flag)
		if err != nil {
			t.Errorf("%s: %v", tc.Name, err)
			continue
		}
		for _, c := range []QoSClass{QoSLSE, QoSLSR, QoSLS, QoSBE} {
			want, ok := tc.Want[c]
			if !ok {
				t.Fatalf("%s: no params for %s", tc.Name, c)
			}
			k, _ := qos.For(map[string]string{KoordLabelQoS: string(c)})
			got := koordParam{Enabled: !k.Off, Expeller: k.Expeller, Idle: k.Idle}
			if !want.Enabled {
				want.Expeller = false // koordlet ignores it for a disabled class
			}
			if got != want {
				t.Errorf("%s: class %s: %+v (flag %q), koordlet %+v", tc.Name, c, got, tc.Flag, want)
			}
		}
	}
	for _, tc := range f.CPUIdle {
		qos, err := ParseQoS(tc.Flag)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := qos.For(map[string]string{KoordLabelQoS: string(tc.Class)})
		if got := map[bool]int{true: 1}[k.Idle]; got != tc.CPUIdle {
			t.Errorf("%s: cpu.idle %d, koordlet %d", tc.Name, got, tc.CPUIdle)
		}
	}
}
