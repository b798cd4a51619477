package grant_test

import (
	"reflect"
	"testing"

	"github.com/podfence/podfence/internal/dra/grant"
)

// FuzzParse: any input is refused or parses to a grant that passes Check and survives a
// Marshal/Parse round trip unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"claimUID":"a","podUIDs":["p"],"exclusive":{"exclusive_dra":"2-3"},"shared":{"shared_dra":500},"epcBytes":4096}`))
	f.Add([]byte(`{"version":1,"claimUID":"a","podUIDs":["p"],"exclusive":{"x":"0-8191"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := grant.Parse(data)
		if err != nil {
			return
		}
		if err := g.Check(); err != nil {
			t.Fatalf("Parse returned a grant Check refuses: %v", err)
		}
		out, err := grant.Marshal(g)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := grant.Parse(out)
		if err != nil || !reflect.DeepEqual(again, g) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, g)
		}
	})
}

// FuzzClaimsInEnv: every UID returned is a valid UID whose marker name appears in env.
func FuzzClaimsInEnv(f *testing.F) {
	f.Add("PODFENCE_CLAIM_a_b=a-b", "PATH=/bin")
	f.Fuzz(func(t *testing.T, a, b string) {
		uids, err := grant.ClaimsInEnv([]string{a, b})
		if err != nil {
			return
		}
		for _, u := range uids {
			if grant.CheckUID("uid", u) != nil || (a != grant.EnvName(u)+"="+u && b != grant.EnvName(u)+"="+u) {
				t.Fatalf("ClaimsInEnv(%q, %q) returned %q", a, b, u)
			}
		}
	})
}
