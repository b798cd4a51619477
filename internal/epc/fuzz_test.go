package epc_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/epc"
	"github.com/podfence/podfence/podapi"
)

// FuzzParseLimit: no panic; an accepted value round-trips through its text form, and an
// error always says what is allowed.
func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"0", "1048576", "1Mi", "64M", "0.5Ki", "1e3", "100m", "-1", "16Ei", " 7 ", "", "Mi", "1..2", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := epc.ParseLimit(s)
		if err != nil {
			if !strings.Contains(err.Error(), "want a whole number of bytes") {
				t.Fatalf("ParseLimit(%q): error without the allowed forms: %v", s, err)
			}
			return
		}
		back, err := epc.ParseLimit(l.String())
		if err != nil || back != l {
			t.Fatalf("ParseLimit(%q) = %v; its text %q reads back as %v, %v", s, l, l.String(), back, err)
		}
	})
}

// FuzzResolve: the annotation found is the first present in order, and an error names it.
func FuzzResolve(f *testing.F) {
	f.Add("app", "1Mi", "2Mi", "3Mi", uint8(7))
	f.Add("", "x", "", "0", uint8(2))
	f.Fuzz(func(t *testing.T, name, ctr, pod, bare string, present uint8) {
		ann := map[string]string{}
		keys := []string{epc.AnnotationContainerPrefix + name, epc.AnnotationPod, epc.Annotation}
		for i, v := range []string{ctr, pod, bare} {
			if present&(1<<i) != 0 {
				ann[keys[i]] = v
			}
		}
		wantKey := ""
		for i, k := range keys {
			if present&(1<<i) != 0 {
				wantKey = k
				break
			}
		}
		_, key, err := epc.Resolve(ann, name)
		if key != wantKey {
			t.Fatalf("key %q, want %q", key, wantKey)
		}
		var ae *podapi.AnnotationError
		if err != nil && (!errors.As(err, &ae) || ae.Key != wantKey || !strings.Contains(err.Error(), wantKey)) {
			t.Fatalf("error %v does not name %s", err, wantKey)
		}
	})
}
