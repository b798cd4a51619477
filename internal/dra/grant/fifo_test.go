package grant_test

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/dra/grant"
)

// TestStoreRefusesFIFO: a named pipe where a grant belongs (nothing writes to it) is refused
// at once with an error naming it, by Get and by List, which still returns the other grants.
func TestStoreRefusesFIFO(t *testing.T) {
	s := grant.Store{Dir: t.TempDir()}
	if err := s.Put(exclusive(claimA, 2)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Dir, claimB+".json")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(claimB); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Errorf("Get of a FIFO: %v, want an error naming %s, not a regular file", err, p)
	}
	grants, errs := s.List()
	if len(grants) != 1 || grants[0].ClaimUID != claimA || len(errs) != 1 || !strings.Contains(errs[0].Error(), p) {
		t.Errorf("List with a FIFO = %v, %v; want grant %s and one error naming %s", grants, errs, claimA, p)
	}
}
