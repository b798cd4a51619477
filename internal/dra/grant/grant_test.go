package grant_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/dra/grant"
)

const (
	claimA = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e01"
	claimB = "6f1c1b1e-0d0a-4c3b-9a55-1f6a3c9d2e02"
	podA   = "0b6f7d2c-5f6e-4e8e-8d4b-2a9c1b3d4e5f"
)

func exclusive(uid string, cpus ...int) grant.Grant {
	return grant.Grant{ClaimUID: uid, Namespace: "ns", Name: "cpus", PodUIDs: []string{podA},
		Exclusive: map[string]cpuset.CPUSet{"exclusive_dra": cpuset.New(cpus...)}}
}

func TestStoreRoundTrip(t *testing.T) {
	s := grant.Store{Dir: filepath.Join(t.TempDir(), "claims")}
	a := exclusive(claimA, 2, 3, 34, 35)
	b := grant.Grant{ClaimUID: claimB, PodUIDs: []string{podA}, Shared: map[string]int64{"shared_dra": 1500}, EPCBytes: 64 << 20}
	for _, g := range []grant.Grant{a, b} {
		if err := s.Put(g); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(claimA)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Errorf("Get = %+v, want %+v", got, a)
	}
	if got.CPUs().String() != "2-3,34-35" || !got.UsedBy(podA) || got.UsedBy("other") {
		t.Errorf("CPUs %s, UsedBy(podA) %v, UsedBy(other) %v", got.CPUs(), got.UsedBy(podA), got.UsedBy("other"))
	}
	all, errs := s.List()
	if len(errs) > 0 || len(all) != 2 || all[0].ClaimUID != claimA || !reflect.DeepEqual(all[1], b) {
		t.Errorf("List = %+v, %v", all, errs)
	}
	if err := s.Delete(claimA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(claimA); !errors.Is(err, grant.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(claimA); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	left, _ := os.ReadDir(s.Dir)
	if len(left) != 1 || left[0].Name() != claimB+".json" {
		t.Errorf("store dir holds %v, want only %s.json (no temporary files)", left, claimB)
	}
}

func TestStoreRefusesBadFiles(t *testing.T) {
	s := grant.Store{Dir: t.TempDir()}
	if err := s.Put(exclusive(claimA, 2)); err != nil {
		t.Fatal(err)
	}
	// A file renamed to another claim's name does not give that claim the grant.
	if err := os.Rename(filepath.Join(s.Dir, claimA+".json"), filepath.Join(s.Dir, claimB+".json")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(claimB); err == nil || !strings.Contains(err.Error(), "holds claim "+claimA) {
		t.Errorf("Get of a renamed grant: %v", err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir, claimA+".json"), []byte(`{"version":1,"claimUID":"`+claimA+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	grants, errs := s.List()
	if len(grants) != 0 || len(errs) != 2 {
		t.Errorf("List of two bad files = %v, errors %v (want none, two errors)", grants, errs)
	}
	for _, uid := range []string{"../etc/passwd", "", "a/b"} {
		if _, err := s.Get(uid); err == nil || errors.Is(err, grant.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want a UID error", uid, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"version":2,"claimUID":"a","podUIDs":["p"],"epcBytes":1}`, "version 2"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"epcBytes":1,"extra":1}`, `unknown field "extra"`},
		{`{"version":1,"claimUID":"a","podUIDs":[],"epcBytes":1}`, "podUIDs has 0 entries"},
		{`{"version":1,"claimUID":"a/b","podUIDs":["p"],"epcBytes":1}`, `claimUID "a/b": has the character '/'`},
		{`{"version":1,"claimUID":"a","podUIDs":["p"]}`, "grants nothing"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"exclusive":{"x":"3-1"}}`, `exclusive pool "x"`},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"exclusive":{"x":""}}`, "no CPUs"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"exclusive":{"x":"1-2","y":"2"}}`, "also given in another pool"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"shared":{"s":0}}`, "millicpu 0 (want > 0)"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"epcBytes":-1}`, "epcBytes -1"},
		{`{"version":1,"claimUID":"a","podUIDs":["p"],"epcBytes":1} {}`, "data after"},
	} {
		_, err := grant.Parse([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s) = %v, want an error with %q", c.json, err, c.want)
		}
	}
	big := `{"version":1,"claimUID":"a","podUIDs":["p"],"namespace":"` + strings.Repeat("n", grant.MaxFileSize) + `"}`
	if _, err := grant.Parse([]byte(big)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("Parse of %d bytes = %v", len(big), err)
	}
}

func TestClaimsInEnv(t *testing.T) {
	env := []string{"PATH=/bin", grant.EnvName(claimB) + "=" + claimB, grant.EnvName(claimA) + "=" + claimA,
		grant.EnvName(claimA) + "=" + claimA}
	got, err := grant.ClaimsInEnv(env)
	if err != nil || !reflect.DeepEqual(got, []string{claimA, claimB}) {
		t.Errorf("ClaimsInEnv = %v, %v", got, err)
	}
	if n := grant.EnvName(claimA); n != "PODFENCE_CLAIM_6f1c1b1e_0d0a_4c3b_9a55_1f6a3c9d2e01" {
		t.Errorf("EnvName = %s", n)
	}
	for _, kv := range []string{
		grant.EnvName(claimA) + "=" + claimB, // the value names another claim
		"PODFENCE_CLAIM_x=../x",
		"PODFENCE_CLAIM_=",
	} {
		if _, err := grant.ClaimsInEnv([]string{kv}); err == nil {
			t.Errorf("ClaimsInEnv(%q) accepted", kv)
		}
	}
}
