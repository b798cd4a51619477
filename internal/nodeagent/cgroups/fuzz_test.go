package cgroups_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
)

// FuzzPath: no panic, and an accepted path is absolute and clean, so that joining it to a
// hierarchy never leaves the hierarchy.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"/kubepods/pod1/abc", "kubepods-burstable-pod1.slice:cri-containerd:abc", ":p:n",
		"-.slice:p:n", "a--b.slice:p:n", "a.slice:p:x.slice", "a.slice:p:..", "/../..", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, _, err := cgroups.Path(s)
		if err != nil {
			return
		}
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			t.Fatalf("Path(%q) = %q: not absolute and clean", s, p)
		}
		if j := filepath.Join("/root", p); j != "/root" && !strings.HasPrefix(j, "/root/") {
			t.Fatalf("Path(%q) = %q leaves the hierarchy: %s", s, p, j)
		}
	})
}

// FuzzParseFlat: no panic; every accepted key and value is one field.
func FuzzParseFlat(f *testing.F) {
	for _, s := range []string{"sgx_epc 1\nsev max\n", "", "\n\n", "a b c", "sgx_epc.max 3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := cgroups.ParseFlat(b)
		if err != nil {
			return
		}
		for k, v := range fl {
			if k == "" || v == "" || len(strings.Fields(k+" "+v)) != 2 {
				t.Fatalf("ParseFlat(%q): entry %q=%q", b, k, v)
			}
			_, _, _ = fl.Uint(k)
		}
	})
}
