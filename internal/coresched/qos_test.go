package coresched

import (
	"strings"
	"testing"
)

// TestParseQoS: a value changes the classes it names over the defaults; the result writes
// back as it reads.
func TestParseQoS(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{in: "", want: "LSR=on+expeller,LS=on+expeller,BE=on,SYSTEM=on"},
		{in: "none", want: "none"},
		{in: " none ", want: "none"},
		{in: "BE=on+idle", want: "LSR=on+expeller,LS=on+expeller,BE=on+idle,SYSTEM=on"},
		{in: "SYSTEM=off,LS=on", want: "LSR=on+expeller,LS=on,BE=on,SYSTEM=off"},
		{in: "BE=off+idle, LSR=on+idle+expeller", want: "LSR=on+expeller+idle,LS=on+expeller,BE=off+idle,SYSTEM=on"},
		{in: "LSR=off,LS=off,BE=off,SYSTEM=off", want: "LSR=off,LS=off,BE=off,SYSTEM=off"},
	} {
		r, err := ParseQoS(tc.in)
		if err != nil || r.String() != tc.want {
			t.Errorf("ParseQoS(%q) = %q, %v; want %q", tc.in, r.String(), err, tc.want)
			continue
		}
		back, err := ParseQoS(r.String())
		if err != nil || back.String() != tc.want {
			t.Errorf("ParseQoS(%q) = %q, %v: does not read back", r.String(), back.String(), err)
		}
	}
	if got := (QoSRules{}).String(); got != "none" || (QoSRules{}).Enabled() {
		t.Errorf("zero QoSRules: %q, enabled %v", got, QoSRules{}.Enabled())
	}
}

// TestParseQoSRefused: every error names the value, what is wrong and what is allowed.
func TestParseQoSRefused(t *testing.T) {
	for _, tc := range []struct{ in, why string }{
		{in: "BE", why: `part "BE" has no '='`},
		{in: "LSE=on", why: "class LSE takes LSR's knobs, as in koordlet: set LSR"},
		{in: "be=on", why: `unknown class "be"`},
		{in: "BE=on,BE=off", why: "class BE is given twice"},
		{in: "BE=", why: `class BE: knobs "" start with "" (want on or off)`},
		{in: "BE=idle", why: `class BE: knobs "idle" start with "idle" (want on or off)`},
		{in: "LS=off+expeller", why: `class LS: knobs "off+expeller": expeller needs on (a class without cookies expels nothing)`},
		{in: "LS=on+idle+idle", why: `class LS: knobs "on+idle+idle" name "idle" twice`},
		{in: "LS=on+on", why: `class LS: knobs "on+on": unknown knob "on"`},
		{in: "LS=on,", why: `part "" has no '='`},
		{in: strings.Repeat("x", 300), why: "300 bytes, over the limit of 256"},
	} {
		_, err := ParseQoS(tc.in)
		want := "QoS knobs " + `"` + clip(tc.in) + `": ` + tc.why + ": " + wantQoS
		if err == nil || err.Error() != want {
			t.Errorf("ParseQoS(%q) = %v\nwant %s", tc.in, err, want)
		}
	}
}

// TestParseQoSClipped: an error quotes a value of up to 64 bytes whole, and the first 64
// bytes of a longer one, marked as cut.
func TestParseQoSClipped(t *testing.T) {
	for _, tc := range []struct{ in, quoted string }{
		{in: "BE=" + strings.Repeat("x", 61), quoted: "BE=" + strings.Repeat("x", 61)},
		{in: "BE=" + strings.Repeat("x", 62), quoted: "BE=" + strings.Repeat("x", 61) + "…"},
		{in: "BE=" + strings.Repeat("ü", 31), quoted: "BE=" + strings.Repeat("ü", 30) + "…"}, // no half character
	} {
		_, err := ParseQoS(tc.in)
		if want := `QoS knobs "` + tc.quoted + `": `; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%d bytes: %v\nwant the prefix %s", len(tc.in), err, want)
		}
	}
}

// TestQoSFlag: repeated flags build on each other; a bad value keeps the rules.
func TestQoSFlag(t *testing.T) {
	r := DefaultQoS()
	for _, s := range []string{"BE=on+idle", "LS=off"} {
		if err := r.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if want := "LSR=on+expeller,LS=off,BE=on+idle,SYSTEM=on"; r.String() != want {
		t.Errorf("after two flags: %q, want %q", r.String(), want)
	}
	if err := r.Set("BE=sometimes"); err == nil || r.String() != "LSR=on+expeller,LS=off,BE=on+idle,SYSTEM=on" {
		t.Errorf("bad value: %v, rules %q", err, r.String())
	}
	if err := r.Set("none"); err != nil || r.Enabled() {
		t.Errorf("none: %v, enabled %v", err, r.Enabled())
	}
	if err := r.Set("BE=off"); err != nil || r.String() != "LSR=on+expeller,LS=on+expeller,BE=off,SYSTEM=on" {
		t.Errorf("after none, BE=off: %q, %v", r.String(), err)
	}
	if r.Type() == "" {
		t.Error("no Type")
	}
}

// TestGroupOfQoS: the class knobs on the group: off gives no cookie whatever the labels,
// expeller a part of the group of its own; no class, an unknown class or rules that do not
// read the label change nothing. LSE follows LSR.
func TestGroupOfQoS(t *testing.T) {
	qos, err := ParseQoS("BE=off+idle,SYSTEM=off")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		rules    Rules
		labels   []string
		id       string
		explicit bool
	}{
		{name: "LS: expeller part of the namespace group", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "LS"}, id: "ns:shop#expeller"},
		{name: "LSE follows LSR", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "LSE", LabelGroup, "a"},
			id: "group:shop/a#expeller", explicit: true},
		{name: "LSR exclusive", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "LSR", KoordLabelPolicy, "exclusive"},
			id: "pod:uid1#expeller", explicit: true},
		{name: "LS none stays none", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "LS", LabelPolicy, "none"}, explicit: true},
		{name: "BE off: no cookie, not explicit", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "BE", LabelGroup, "a"}},
		{name: "SYSTEM off", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "SYSTEM", LabelPolicy, "exclusive"}},
		{name: "unknown class: as without", rules: Rules{QoS: qos}, labels: []string{KoordLabelQoS, "be", LabelGroup, "a"},
			id: "group:shop/a", explicit: true},
		{name: "no class", rules: Rules{QoS: qos}, id: "ns:shop"},
		{name: "rules without QoS ignore the label", labels: []string{KoordLabelQoS, "BE"}, id: "ns:shop"},
		{name: "node default, expeller", rules: Rules{Default: ByNode, QoS: qos}, labels: []string{KoordLabelQoS, "LS"}, id: "node#expeller"},
		{name: "shared group, expeller", rules: Rules{Shared: sharedAB(), QoS: qos},
			labels: []string{KoordLabelQoS, "LS", LabelGroup, "ab"}, id: "group:ab#expeller", explicit: true},
	} {
		l := map[string]string{}
		for i := 0; i+1 < len(tc.labels); i += 2 {
			l[tc.labels[i]] = tc.labels[i+1]
		}
		g, err := tc.rules.GroupOf(Pod{UID: "uid1", Namespace: "shop", Labels: l})
		if err != nil || g.ID() != tc.id || g.Explicit() != tc.explicit {
			t.Errorf("%s: %q explicit=%v, %v; want %q explicit=%v", tc.name, g.ID(), g.Explicit(), err, tc.id, tc.explicit)
		}
	}
}

func sharedAB() SharedGroups {
	var s SharedGroups
	s.Share("ab", "shop", "other")
	return s
}

// TestQoSIdle: only a class with the idle knob asks for cpu.idle.
func TestQoSIdle(t *testing.T) {
	qos, err := ParseQoS("BE=on+idle")
	if err != nil {
		t.Fatal(err)
	}
	for class, want := range map[string]bool{"BE": true, "LS": false, "": false, "BE ": false} {
		k, _ := qos.For(map[string]string{KoordLabelQoS: class})
		if k.Idle != want {
			t.Errorf("class %q: idle %v, want %v", class, k.Idle, want)
		}
	}
	if k, ok := (QoSRules{}).For(map[string]string{KoordLabelQoS: "BE"}); ok || k.Idle {
		t.Errorf("zero rules: %+v, %v", k, ok)
	}
}

func FuzzParseQoS(f *testing.F) {
	for _, s := range []string{"", "none", "BE=on+idle", "LSR=off,LS=on+expeller", "SYSTEM=on+idle+expeller", "x=y,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseQoS(s)
		if err != nil {
			if !strings.Contains(err.Error(), wantQoS) {
				t.Fatalf("error without what is allowed: %v", err)
			}
			return
		}
		back, err := ParseQoS(r.String())
		if err != nil || back.String() != r.String() {
			t.Fatalf("%q: %q does not read back: %q, %v", s, r.String(), back.String(), err)
		}
	})
}
