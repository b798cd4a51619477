package sandbox_test

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/sandbox"
)

func TestRuntimes(t *testing.T) {
	def, err := sandbox.ParseRuntimes(sandbox.DefaultRuntimes())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		patterns []string
		handler  string
		want     bool
	}{
		{name: "default: kata", handler: "kata", want: true},
		{name: "default: kata-qemu", handler: "kata-qemu", want: true},
		{name: "default: kata-clh", handler: "kata-clh", want: true},
		{name: "default: the default runtime", handler: "", want: false},
		{name: "default: runc", handler: "runc", want: false},
		{name: "default: kata alone, not a prefix", handler: "katafoo", want: false},
		{name: "default: kata- (the glob's * matches nothing too)", handler: "kata-", want: true},
		{name: "exact list", patterns: []string{"gvisor", " fc "}, handler: "fc", want: true},
		{name: "character class", patterns: []string{"kata-[qc]*"}, handler: "kata-fc", want: false},
		{name: "empty list matches nothing", patterns: []string{}, handler: "kata", want: false},
		{name: "blank entries are skipped", patterns: []string{"", " "}, handler: "", want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := def
			if tc.patterns != nil {
				if r, err = sandbox.ParseRuntimes(tc.patterns); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.Match(tc.handler); got != tc.want {
				t.Errorf("%q.Match(%q) = %v, want %v", r, tc.handler, got, tc.want)
			}
		})
	}
	if def.String() != "kata,kata-*" || def.IsEmpty() {
		t.Errorf("default runtimes %q", def)
	}
	if (sandbox.Runtimes{}).Match("kata") || !(sandbox.Runtimes{}).IsEmpty() {
		t.Error("the zero Runtimes matches nothing")
	}
}

func TestParseRuntimesError(t *testing.T) {
	_, err := sandbox.ParseRuntimes([]string{"kata", "kata-[qemu"})
	want := `runtime handler pattern "kata-[qemu": syntax error in pattern (want a name or a glob such as kata-*)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}
