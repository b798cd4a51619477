package coresched

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// QoSClass is a value of Koordinator's koordinator.sh/qosClass label
// (https://koordinator.sh/docs/architecture/qos/).
type QoSClass string

// The classes. LSE takes LSR's knobs, as in koordlet; any other label value is no class.
const (
	QoSLSE    QoSClass = "LSE"
	QoSLSR    QoSClass = "LSR"
	QoSLS     QoSClass = "LS"
	QoSBE     QoSClass = "BE"
	QoSSystem QoSClass = "SYSTEM"
)

// qosClasses are the classes with knobs of their own, in the order String writes them.
var qosClasses = []QoSClass{QoSLSR, QoSLS, QoSBE, QoSSystem}

// Knobs are what the pods of one QoS class get; the zero Knobs is core scheduling as for
// pods without the label. They mirror koordlet's CPUQOS of a class under its coreSched CPU
// policy: Off is enable=false, Expeller is coreExpeller, Idle is schedIdle=1.
type Knobs struct {
	// Off gives the class's pods no cookie (cookie 0), whatever their labels ask.
	Off bool
	// Expeller gives the class's pods a cookie apart from their group's pods of other
	// classes, so an idle (BE) task never runs beside them on one core.
	Expeller bool
	// Idle sets cpu.idle=1 on the pod's cgroup (cgroup v2, Linux 5.15): its tasks run only
	// when its sibling cgroups leave a CPU idle.
	Idle bool
}

// The words of a class's knobs in the flag's text.
const (
	knobOn       = "on"
	knobOff      = "off"
	knobExpeller = "expeller"
	knobIdle     = "idle"
)

func (k Knobs) String() string {
	w := []string{knobOn}
	if k.Off {
		w[0] = knobOff
	}
	if k.Expeller {
		w = append(w, knobExpeller)
	}
	if k.Idle {
		w = append(w, knobIdle)
	}
	return strings.Join(w, "+")
}

// QoSRules are the knobs of each QoS class of a node. The zero value does not read the
// label: every pod is grouped as if it had none. Build it with DefaultQoS or ParseQoS; it
// is a value (a copy shares the map, which is never changed after it is built).
type QoSRules struct {
	m map[QoSClass]Knobs
}

// DefaultQoS are koordlet's default CPU QoS knobs of each class, with core scheduling on
// for every class (koordlet's own default CPU policy is Group Identity, which turns core
// scheduling off; running podfence's agent is choosing core scheduling): LSR (and LSE) and
// LS are expellers, BE gets no cpu.idle (koordlet's default schedIdle 0: cpu.idle pins
// cpu.weight, which the kubelet then cannot set). SYSTEM keeps core scheduling, which
// koordlet leaves off: the label is the pod author's, and cookie 0 shares cores with any
// namespace (SYSTEM=off restores koordlet's choice).
func DefaultQoS() QoSRules {
	return QoSRules{m: map[QoSClass]Knobs{
		QoSLSR:    {Expeller: true},
		QoSLS:     {Expeller: true},
		QoSBE:     {},
		QoSSystem: {},
	}}
}

// Enabled reports whether the rules read the QoS label.
func (r QoSRules) Enabled() bool { return r.m != nil }

// AnyIdle reports whether some class has the idle knob.
func (r QoSRules) AnyIdle() bool {
	for _, k := range r.m {
		if k.Idle {
			return true
		}
	}
	return false
}

// Class returns the class of a pod's labels; ok is false for no label or an unknown value.
func Class(labels map[string]string) (QoSClass, bool) {
	c := QoSClass(labels[KoordLabelQoS])
	switch c {
	case QoSLSE, QoSLSR, QoSLS, QoSBE, QoSSystem:
		return c, true
	}
	return "", false
}

// For returns the knobs of a pod's labels: its class's, or the zero Knobs when it has no
// class or the rules do not read the label.
func (r QoSRules) For(labels map[string]string) (Knobs, bool) {
	c, ok := Class(labels)
	if !ok { // a nil r.m (no rules) finds nothing below either
		return Knobs{}, false
	}
	if c == QoSLSE {
		c = QoSLSR
	}
	k, ok := r.m[c]
	return k, ok
}

// String writes the rules as ParseQoS reads them: "LSR=on+expeller,LS=on+expeller,BE=on,
// SYSTEM=on" for DefaultQoS; "none" for the zero value.
func (r QoSRules) String() string {
	if r.m == nil {
		return "none"
	}
	parts := make([]string, 0, len(qosClasses))
	for _, c := range qosClasses {
		parts = append(parts, string(c)+"="+r.m[c].String())
	}
	return strings.Join(parts, ",")
}

const wantQoS = `want "none" or comma-separated <class>=<knobs> with class LSR (LSE follows it), LS, BE or SYSTEM ` +
	`and knobs "on" or "off", then optionally "+expeller" (on only) and "+idle", e.g. "BE=on+idle,LS=off"`

// maxQoSLen bounds the work on one flag value; every class and knob fits in far less.
const maxQoSLen = 256

// ParseQoS reads per-class knobs over DefaultQoS: "BE=on+idle" changes BE and keeps the other
// classes' defaults; "none" is the zero QoSRules; "" is DefaultQoS. Errors name the part, its
// value and what is allowed.
func ParseQoS(s string) (QoSRules, error) {
	return DefaultQoS().parse(s)
}

// parse reads s over r (see ParseQoS).
func (r QoSRules) parse(s string) (QoSRules, error) {
	bad := func(err error) (QoSRules, error) {
		return QoSRules{}, fmt.Errorf("QoS knobs %q: %w: %s", clip(s), err, wantQoS)
	}
	switch s = strings.TrimSpace(s); {
	case len(s) > maxQoSLen:
		return bad(fmt.Errorf("%d bytes, over the limit of %d", len(s), maxQoSLen))
	case s == "none":
		return QoSRules{}, nil
	case s == "":
		return r, nil
	}
	out := QoSRules{m: map[QoSClass]Knobs{}}
	for c, k := range DefaultQoS().m {
		if v, ok := r.m[c]; ok {
			k = v
		}
		out.m[c] = k
	}
	seen := map[QoSClass]bool{}
	for _, part := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		c := QoSClass(name)
		switch {
		case !ok:
			return bad(fmt.Errorf("part %q has no '='", part))
		case c == QoSLSE:
			return bad(errors.New("class LSE takes LSR's knobs, as in koordlet: set LSR"))
		case !slices.Contains(qosClasses, c):
			return bad(fmt.Errorf("unknown class %q", name))
		case seen[c]:
			return bad(fmt.Errorf("class %s is given twice", c))
		}
		seen[c] = true
		k, err := parseKnobs(value)
		if err != nil {
			return bad(fmt.Errorf("class %s: %w", c, err))
		}
		out.m[c] = k
	}
	return out, nil
}

// parseKnobs reads "on", "off", "on+expeller", "on+idle", "off+idle", ...
func parseKnobs(v string) (Knobs, error) {
	words := strings.Split(v, "+")
	var k Knobs
	switch words[0] {
	case knobOn:
	case knobOff:
		k.Off = true
	default:
		return Knobs{}, fmt.Errorf("knobs %q start with %q (want on or off)", v, words[0])
	}
	seen := map[string]bool{}
	for _, w := range words[1:] {
		switch {
		case seen[w]:
			return Knobs{}, fmt.Errorf("knobs %q name %q twice", v, w)
		case w == knobExpeller && k.Off:
			return Knobs{}, fmt.Errorf("knobs %q: expeller needs on (a class without cookies expels nothing)", v)
		case w == knobExpeller:
			k.Expeller = true
		case w == knobIdle:
			k.Idle = true
		default:
			return Knobs{}, fmt.Errorf("knobs %q: unknown knob %q", v, w)
		}
		seen[w] = true
	}
	return k, nil
}

// clip cuts a long value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

// String, Set and Type make *QoSRules a command-line flag value (pflag.Value): each Set reads
// its value over the rules so far.
func (r *QoSRules) Set(s string) error {
	v, err := r.parse(s)
	if err == nil {
		*r = v
	}
	return err
}

func (*QoSRules) Type() string { return "class=knobs,..." }
