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

func TestOpen(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string // VERSION content before Open; "-" for none
		wantErr string // %s is the directory
	}{
		{name: "new directory", version: "-"},
		{name: "version 1", version: "1\n"},
		{name: "version 1 without newline", version: "1"},
		{name: "version 2", version: "2\n",
			wantErr: `checkpoint version file %[1]s/VERSION holds version "2", but this podfence supports only version 1: run a ` +
				`podfence release that supports version "2", or drain the node and delete %[1]s`},
		{name: "garbage", version: "x\n",
			wantErr: `checkpoint version file %[1]s/VERSION holds version "x", but this podfence supports only version 1: run a ` +
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
			if b, err := os.ReadFile(filepath.Join(dir, "VERSION")); err != nil || strings.TrimSpace(string(b)) != "1" {
				t.Errorf("VERSION = %q, %v; want \"1\"", b, err)
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
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
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
			if got := mustLoad(t, s); !sameAllocs(got, tc.want) {
				t.Errorf("Load() = %+v, want %+v", got, tc.want)
			}
			// A reopened store reads the same.
			if got := mustLoad(t, mustOpen(t, s.Dir())); !sameAllocs(got, tc.want) {
				t.Errorf("Load() after reopen = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUnsafeNames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      allocation.Key
		wantFile string
	}{
		{name: "uuid and label", key: allocation.Key{PodUID: uid1, Container: "app"}, wantFile: uid1 + "_app.json"},
		{name: "parent dir", key: allocation.Key{PodUID: "..", Container: "../x"}, wantFile: "%2E%2E_%2E%2E%2Fx.json"},
		{name: "slash", key: allocation.Key{PodUID: "a/b", Container: "/etc/passwd"}, wantFile: "a%2Fb_%2Fetc%2Fpasswd.json"},
		{name: "empty container", key: allocation.Key{PodUID: uid1}, wantFile: uid1 + "_.json"},
		{name: "empty both", key: allocation.Key{}, wantFile: "_.json"},
		{name: "leading dot", key: allocation.Key{PodUID: ".hidden", Container: ".tmp"}, wantFile: "%2Ehidden_%2Etmp.json"},
		{name: "separator in uid", key: allocation.Key{PodUID: "a_b", Container: "c"}, wantFile: "a%5Fb_c.json"},
		{name: "separator in container", key: allocation.Key{PodUID: "a", Container: "b_c"}, wantFile: "a_b%5Fc.json"},
		{name: "kept bytes and their neighbours", key: allocation.Key{PodUID: "09AZaz-", Container: "/:@[`{"},
			wantFile: "09AZaz-_%2F%3A%40%5B%60%7B.json"},
		{name: "escape char and bytes", key: allocation.Key{PodUID: "%41", Container: "\x00\x7f é"}, wantFile: "%2541_%00%7F%20%C3%A9.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fileName(tc.key); got != tc.wantFile {
				t.Errorf("fileName(%q) = %q, want %q", tc.key, got, tc.wantFile)
			}
			s := mustOpen(t, t.TempDir())
			a := shared(tc.key.PodUID, tc.key.Container, "shared_b", 100)
			if err := s.Put(a); err != nil {
				t.Fatal(err)
			}
			names := dirNames(t, s.Dir())
			if want := []string{"VERSION", tc.wantFile}; !slices.Equal(names, want) && !slices.Equal(names, []string{tc.wantFile, "VERSION"}) {
				t.Errorf("directory holds %q, want %q", names, want)
			}
			if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{a}) {
				t.Errorf("Load() = %+v, want %+v", got, a)
			}
		})
	}
}

func TestPutRejects(t *testing.T) {
	long := strings.Repeat("/", 80) // 240 bytes escaped
	for _, tc := range []struct {
		name    string
		key     allocation.Key
		wantErr string
	}{
		{name: "name too long", key: allocation.Key{PodUID: uid1, Container: long},
			wantErr: `checkpoint container "` + long + `" of pod "` + uid1 + `": file name is 282 bytes, over the limit of 240`},
		{name: "invalid UTF-8 container", key: allocation.Key{PodUID: uid1, Container: "a\xff"},
			wantErr: `checkpoint container "a\xff" of pod "` + uid1 + `": pod UID and container name must be valid UTF-8`},
		{name: "invalid UTF-8 pod UID", key: allocation.Key{PodUID: "\xc3", Container: "a"},
			wantErr: `checkpoint container "a" of pod "\xc3": pod UID and container name must be valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			if err := s.Put(shared(tc.key.PodUID, tc.key.Container, "shared_b", 1)); err == nil || err.Error() != tc.wantErr {
				t.Errorf("Put error = %v, want %s", err, tc.wantErr)
			}
			if err := s.Delete(tc.key); err != nil {
				t.Errorf("Delete: %v", err)
			}
			if got := mustLoad(t, s); len(got) != 0 {
				t.Errorf("Load() = %+v, want none", got)
			}
		})
	}
}

// TestConcurrent runs Puts, Deletes and Loads at once (for -race); Load must not remove the
// temp file of a Put in flight.
func TestConcurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if err := s.Put(shared(uid1, fmt.Sprintf("g%d-%d", g, i), "shared_b", int64(i))); err != nil {
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
	if got := mustLoad(t, s); len(got) != 100 {
		t.Errorf("Load() returned %d records, want 100", len(got))
	}
}
