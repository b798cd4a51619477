package admission

import (
	"net/http"
	"testing"
)

// TestKoordinatorUnknownPolicyWarns: a Koordinator policy label podfence does not know is
// admitted as koordlet reads it (the default policy), and /validate warns the user which
// group that means; a known value, or none, gives no warning. /mutate adds none of its own.
func TestKoordinatorUnknownPolicyWarns(t *testing.T) {
	srv := newTestServer(t, testConfig(t))
	const head = `label koordinator.sh/core-sched-policy="strict" is not a core-scheduling policy (want "exclusive", "none" or ` +
		`empty): podfence reads it as empty, as Koordinator does, so the pod joins `
	for _, tc := range []struct {
		name  string
		items []any
		warn  string
	}{
		{name: "unknown, no group", items: []any{"label:koordinator.sh/core-sched-policy=strict"},
			warn: head + "the node's default group"},
		{name: "unknown, a group", items: []any{"label:koordinator.sh/core-sched-policy=strict",
			"label:koordinator.sh/core-sched-group-id=g1"}, warn: head + "its namespace's group g1"},
		{name: "known", items: []any{"label:koordinator.sh/core-sched-policy=exclusive"}},
		{name: "podfence's label hides Koordinator's", items: []any{"label:podfence.io/core-sched-policy=",
			"label:koordinator.sh/core-sched-policy=strict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := reviewJSON(t, testPod("s", append(tc.items, ctr("app"))...))
			status, raw, resp := post(t, srv, PathValidate, body)
			if status != http.StatusOK || !resp.Allowed {
				t.Fatalf("/validate: status %d, want allowed: %s", status, raw)
			}
			var want []string
			if tc.warn != "" {
				want = []string{tc.warn}
			}
			if len(resp.Warnings) != len(want) || len(want) == 1 && resp.Warnings[0] != want[0] {
				t.Errorf("/validate warnings %q\nwant %q", resp.Warnings, want)
			}
			if _, raw, resp := post(t, srv, PathMutate, body); !resp.Allowed || len(resp.Warnings) != 0 {
				t.Errorf("/mutate: want allowed without warnings: %s", raw)
			}
		})
	}
}
