package pools

import (
	"errors"
	"strings"
	"testing"
)

// TestPoolNameLimits pins which pool names make valid extended resource names: the first and
// last characters at each end of the letter and digit ranges are accepted, the characters just
// outside them are refused, and so is anything past ASCII; 63 characters is the most.
func TestPoolNameLimits(t *testing.T) {
	const want = " (want [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters, so that " +
		"podfence.io/<pool> is a valid extended resource name)"
	longest := "exclusive_" + strings.Repeat("x", 53)
	for _, tc := range []struct {
		name string
		err  string // "" = accepted
	}{
		{name: "a"}, {name: "z"}, {name: "A"}, {name: "Z"}, {name: "0"}, {name: "9"},
		{name: "a0"}, {name: "z9"}, {name: "AZ"}, {name: "Za"}, {name: "0z"}, {name: "9A"},
		{name: "a-b_c.d"},
		{name: longest},
		{name: longest + "x", err: `is 64 characters long` + want},
		{name: "`a", err: "must start and end with a letter or digit" + want},
		{name: "a{", err: "must start and end with a letter or digit" + want},
		{name: "@a", err: "must start and end with a letter or digit" + want},
		{name: "a[", err: "must start and end with a letter or digit" + want},
		{name: "/a", err: "must start and end with a letter or digit" + want},
		{name: "a:", err: "must start and end with a letter or digit" + want},
		{name: "_a", err: "must start and end with a letter or digit" + want},
		{name: "a.", err: "must start and end with a letter or digit" + want},
		{name: "a:b", err: "has the character ':'" + want},
		// š is U+0161: its low byte is 'a', which must not make it pass.
		{name: "exclusive_š_a", err: "has the character 'š'" + want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, ok := ParseResourceName("podfence.io/" + tc.name)
			if ok != (tc.err == "") || (ok && pool != tc.name) {
				t.Errorf("ParseResourceName(podfence.io/%s) = %q, %v; want accepted = %v", tc.name, pool, ok, tc.err == "")
			}
			cfg, err := Parse("poolconfig-a.yaml", []byte(`pools: {"`+tc.name+`": {cpus: "0"}}`))
			if tc.err == "" {
				if err != nil || len(cfg.Pools) != 1 || cfg.Pools[0].Name != tc.name {
					t.Errorf("Parse refused pool name %q: %v", tc.name, err)
				}
				return
			}
			if wantErr := `poolconfig-a.yaml: pool name "` + tc.name + `": ` + tc.err; err == nil || err.Error() != wantErr {
				t.Errorf("Parse of pool name %q: error %v\nwant %s", tc.name, err, wantErr)
			}
		})
	}
}

// TestConfigErrorReasonFromErr: a ConfigError without a Reason reads the underlying error's
// text (a Reason, when set, wins).
func TestConfigErrorReasonFromErr(t *testing.T) {
	for _, tc := range []struct {
		err  ConfigError
		want string
	}{
		{ConfigError{Source: "a.yaml", Pool: "exclusive_a", Field: "cpus", Err: errors.New("bad list")},
			`a.yaml: pool "exclusive_a": cpus: bad list`},
		{ConfigError{Source: "a.yaml", Reason: "why", Err: errors.New("bad list")}, "a.yaml: why"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v.Error() = %q, want %q", tc.err, got, tc.want)
		}
	}
}
