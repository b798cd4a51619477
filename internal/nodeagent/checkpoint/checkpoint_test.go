package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

const uid1, uid2 = "0b9c5b1e-4a0e-4d5c-9a51-1f0e0c2f7a11", "7d3e2f10-8c4b-4f6a-b2d9-55a1c3e4f6b2"

func mustParse(t testing.TB, s string) cpuset.CPUSet {
	t.Helper()
	c, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func exclusive(t testing.TB, uid, ctr, pool, cpus, idled string) allocation.Allocation {
	return allocation.Allocation{PodUID: uid, Namespace: "ns", Pod: "pod", Container: ctr, Pool: pool,
		Type: allocation.TypeExclusive, CPUs: mustParse(t, cpus), Idled: mustParse(t, idled)}
}

func shared(uid, ctr, pool string, milli int64) allocation.Allocation {
	return allocation.Allocation{PodUID: uid, Container: ctr, Pool: pool, Type: allocation.TypeShared, MilliCPU: milli}
}

// sameAllocs compares allocations by their JSON form, which covers every field and treats
// nil and empty CPU sets alike.
func sameAllocs(a, b []allocation.Allocation) bool {
	return slices.EqualFunc(a, b, func(x, y allocation.Allocation) bool {
		jx, errx := json.Marshal(x)
		jy, erry := json.Marshal(y)
		return errx == nil && erry == nil && string(jx) == string(jy)
	})
}

func mustOpen(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t testing.TB, s *Store) []allocation.Allocation {
	t.Helper()
	got, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dirNames lists dir's entries, sorted.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// journalLines returns the journal's lines (without newlines).
func journalLines(t testing.TB, s *Store) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir(), JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string // VERSION content before Open; "-" for none
		wantErr string // %s is the directory
	}{
		{name: "new directory", version: "-"},
		{name: "version 2", version: "2\n"},
		{name: "version 2 without newline", version: "2"},
		{name: "version 1 (converted)", version: "1\n"},
		{name: "version 3", version: "3\n",
			wantErr: `checkpoint version file %[1]s/VERSION holds version "3", but this podfence supports only versions 1 and 2: run a ` +
				`podfence release that supports version "3", or drain the node and delete %[1]s`},
		{name: "garbage", version: "x\n",
			wantErr: `checkpoint version file %[1]s/VERSION holds version "x", but this podfence supports only versions 1 and 2: run a ` +
				`podfence release that supports version "x", or drain the node and delete %[1]s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "b")
			if tc.version != "-" {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, "VERSION"), tc.version)
			}
			s, err := Open(dir)
			if tc.wantErr != "" {
				if want := fmt.Sprintf(tc.wantErr, dir); err == nil || err.Error() != want {
					t.Fatalf("Open error = %v, want %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Dir() != dir {
				t.Errorf("Dir() = %q, want %q", s.Dir(), dir)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "VERSION")); err != nil || strings.TrimSpace(string(b)) != "2" {
				t.Errorf("VERSION = %q, %v; want \"2\"", b, err)
			}
			if fi, err := os.Stat(dir); err != nil || tc.version == "-" && fi.Mode().Perm() != 0o700 {
				t.Errorf("stat %s = %v, %v; want mode 0700", dir, fi.Mode(), err)
			}
		})
	}
}

func TestPutLoadDelete(t *testing.T) {
	a1 := exclusive(t, uid1, "app", "exclusive_a", "4-5", "12-13")
	a2 := shared(uid1, "sidecar", "shared_b", 250)
	a3 := allocation.Allocation{PodUID: uid2, Container: "pause", Pool: "default", Type: allocation.TypeDefault}
	a1b := exclusive(t, uid1, "app", "exclusive_a", "6", "")
	for _, tc := range []struct {
		name   string
		put    []allocation.Allocation
		delete []allocation.Key
		want   []allocation.Allocation
	}{
		{name: "empty"},
		{name: "round trip sorted by key", put: []allocation.Allocation{a3, a2, a1}, want: []allocation.Allocation{a1, a2, a3}},
		{name: "put replaces", put: []allocation.Allocation{a1, a2, a1b}, want: []allocation.Allocation{a1b, a2}},
		{name: "delete", put: []allocation.Allocation{a1, a2, a3}, delete: []allocation.Key{a2.Key()}, want: []allocation.Allocation{a1, a3}},
		{name: "delete missing", put: []allocation.Allocation{a1}, delete: []allocation.Key{a2.Key(), a1.Key(), a1.Key()}},
	} {
		for _, batch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/batch=%v", tc.name, batch), func(t *testing.T) {
				s := mustOpen(t, t.TempDir())
				if batch {
					if err := s.WriteBatch(tc.put, nil); err != nil {
						t.Fatal(err)
					}
					if err := s.WriteBatch(nil, tc.delete); err != nil {
						t.Fatal(err)
					}
				} else {
					for _, a := range tc.put {
						if err := s.Put(a); err != nil {
							t.Fatal(err)
						}
					}
					for _, k := range tc.delete {
						if err := s.Delete(k); err != nil {
							t.Fatalf("Delete(%v): %v", k, err)
						}
					}
				}
				if got := mustLoad(t, s); !sameAllocs(got, tc.want) {
					t.Errorf("Load() = %+v, want %+v", got, tc.want)
				}
				if names := dirNames(t, s.Dir()); len(tc.put)+len(tc.delete) == 0 && !slices.Equal(names, []string{"VERSION"}) {
					t.Errorf("a checkpoint never written holds %q, want VERSION alone", names)
				}
				// A reopened store reads the same, and so does a second Load (after the rewrite).
				r := mustOpen(t, s.Dir())
				for i := range 2 {
					if got := mustLoad(t, r); !sameAllocs(got, tc.want) {
						t.Errorf("Load() %d after reopen = %+v, want %+v", i, got, tc.want)
					}
				}
			})
		}
	}
}

// TestAnyKeyRoundTrips: keys with path characters, separators, newlines and quotes are
// data in a JSON line: each comes back as it was, and none names a file.
func TestAnyKeyRoundTrips(t *testing.T) {
	keys := []allocation.Key{
		{PodUID: uid1, Container: "app"},
		{PodUID: "..", Container: "../x"},
		{PodUID: "a/b", Container: "/etc/passwd"},
		{PodUID: uid1},
		{},
		{PodUID: "a\nb", Container: "c\"d\\"},
		{PodUID: "%41", Container: "\x00\x7f é"},
	}
	s := mustOpen(t, t.TempDir())
	var want []allocation.Allocation
	for i, k := range keys {
		a := shared(k.PodUID, k.Container, "shared_b", int64(i+1))
		if err := s.Put(a); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
		want = append(want, a)
	}
	slices.SortFunc(want, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	if got := mustLoad(t, mustOpen(t, s.Dir())); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
	if names := dirNames(t, s.Dir()); !slices.Equal(names, []string{"VERSION", JournalFile}) &&
		!slices.Equal(names, []string{JournalFile, "VERSION"}) {
		t.Errorf("directory holds %q, want VERSION and %s", names, JournalFile)
	}
}

func TestPutRejects(t *testing.T) {
	big := shared(uid1, "app", "shared_b", 1)
	big.Namespace = strings.Repeat("n", 64<<10)
	for _, tc := range []struct {
		name    string
		a       allocation.Allocation
		wantErr string
	}{
		{name: "invalid UTF-8 container", a: shared(uid1, "a\xff", "shared_b", 1),
			wantErr: `checkpoint container "a\xff" of pod "` + uid1 + `": pod UID and container name must be valid UTF-8`},
		{name: "invalid UTF-8 pod UID", a: shared("\xc3", "a", "shared_b", 1),
			wantErr: `checkpoint container "a" of pod "\xc3": pod UID and container name must be valid UTF-8`},
		{name: "over 64 KiB", a: big,
			wantErr: `checkpoint container "app" of pod "` + uid1 + `": record is 65674 bytes, over the limit of 65536 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			if err := s.Put(tc.a); err == nil || err.Error() != tc.wantErr {
				t.Errorf("Put error = %v, want %s", err, tc.wantErr)
			}
			if err := s.WriteBatch([]allocation.Allocation{tc.a}, nil); err == nil || err.Error() != tc.wantErr {
				t.Errorf("WriteBatch error = %v, want %s", err, tc.wantErr)
			}
			if err := s.Delete(tc.a.Key()); tc.a.Namespace == "" && err == nil {
				t.Errorf("Delete of an invalid key succeeded")
			}
			if got := mustLoad(t, s); len(got) != 0 {
				t.Errorf("Load() = %+v, want none", got)
			}
		})
	}
}

// TestConcurrent runs Puts, Deletes, batches and Loads at once (for -race); every change
// made is read back.
func TestConcurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				a := shared(uid1, fmt.Sprintf("g%d-%d", g, i), "shared_b", int64(i))
				var err error
				if i%2 == 0 {
					err = s.Put(a)
				} else {
					err = s.WriteBatch([]allocation.Allocation{a}, []allocation.Key{{PodUID: uid2, Container: fmt.Sprint(i)}})
				}
				if err != nil {
					t.Error(err)
				}
				if err := s.Delete(allocation.Key{PodUID: uid2, Container: fmt.Sprint(i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 25 {
			if _, err := s.Load(); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if got := mustLoad(t, mustOpen(t, s.Dir())); len(got) != 100 {
		t.Errorf("Load() returned %d records, want 100", len(got))
	}
}
