package quantity

import (
	"runtime"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "500m", want: "500m"},
		{in: "2", want: "2"},
		{in: "1Mi", want: "1Mi"},
		{in: "1e3", want: "1e3"},
		{in: "1e-999", want: "1e-9"}, // rounded up to the smallest unit
		{in: "1e-999999999", err: `quantity "1e-999999999" has an exponent of more than 3 digits`},
		{in: "1E+0000999999", err: "has an exponent of more than 3 digits"},
		{in: strings.Repeat("9", 65), err: "quantity of 65 characters: want at most 64"},
		{in: "x", err: `quantity "x": quantities must match the regular expression`},
	} {
		q, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || q.String() != tc.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tc.in, q.String(), err, tc.want)
		}
	}
}

// fuzzMaxAlloc bounds what one Parse allocates. ParseQuantity's work grows with a negative
// exponent, in time and in memory alike: about 4 KB at 1e-999, 37 KB at 1e-9999, 400 KB at
// 1e-99999 (and 1e-999999999 never returns). Memory, unlike time, does not depend on how
// loaded the machine is.
const fuzzMaxAlloc = 16 << 10

// FuzzParse: whatever the text, Parse does bounded work (fuzzMaxAlloc) and what it accepts
// can be used.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"500m", "1e-999", "1e-999999999", "0.5Ki", "+.5e3", "1E99", "-" + strings.Repeat("9", 60) + "e-999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		q, err := Parse(s)
		if err == nil {
			_, _ = q.Value(), q.MilliValue()
			_ = q.String()
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > fuzzMaxAlloc {
			t.Fatalf("Parse(%q) allocated %d bytes, want at most %d", s, n, fuzzMaxAlloc)
		}
	})
}
