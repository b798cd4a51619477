package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// v1Fixture is what testdata/v1 (a checkpoint written by format version 1) holds.
func v1Fixture(t *testing.T) []allocation.Allocation {
	app := exclusive(t, uid1, "app", "exclusive_a", "4-5", "12-13")
	app.SharedPool, app.MilliCPU = "shared_b", 100
	return []allocation.Allocation{
		app,
		shared(uid1, "sidecar", "shared_b", 250),
		{PodUID: uid2, Namespace: "kube-system", Pod: "dns", Container: "pause", Pool: "default", Type: allocation.TypeDefault},
	}
}

// TestConvertV1: Open turns a version 1 checkpoint into the journal: the same records,
// VERSION 2, and no record file left.
func TestConvertV1(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir)
	if got, want := mustLoad(t, s), v1Fixture(t); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"VERSION", JournalFile}) {
		t.Errorf("directory holds %q, want VERSION and %s", names, JournalFile)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "VERSION")); err != nil || string(b) != "2\n" {
		t.Errorf("VERSION = %q, %v; want 2", b, err)
	}
}

// TestConvertV1Again: a conversion cut short before VERSION was written (a journal is there,
// VERSION still 1) converts again from the record files, replacing that journal.
func TestConvertV1Again(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, JournalFile), putLine(t, shared("other", "x", "shared_b", 1))+`{"put":{"po`)
	if got, want := mustLoad(t, mustOpen(t, dir)), v1Fixture(t); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
}

// TestConvertV1DamagedRecord: a version 1 record that cannot be read is left out, reported
// by the first Load with its file and problem, and removed; the others convert.
func TestConvertV1DamagedRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, uid2+"_x.json")
	writeFile(t, bad, `{"version":1,"allocation":{"podUID"`)
	renamed := filepath.Join(dir, uid2+"_y.json")
	writeFile(t, renamed, `{"version":1,"allocation":{"podUID":"`+uid1+`","container":"app"}}`)
	huge := filepath.Join(dir, uid2+"_z.json")
	writeFile(t, huge, strings.Repeat(" ", maxRecordBytes+1))
	s := mustOpen(t, dir)
	got, err := s.Load()
	if want := v1Fixture(t); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
	for _, want := range []string{
		"checkpoint record " + bad + ": decode JSON: unexpected EOF: left out",
		"checkpoint record " + renamed + `: holds container "app" of pod "` + uid1 + `", whose file name is ` + uid1 + "_app.json: left out",
		"checkpoint record " + huge + ": file is over the limit of 65536 bytes: left out",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error = %v, want it to contain %q", err, want)
		}
	}
	if _, err := s.Load(); err != nil {
		t.Errorf("second Load: %v (the problems are reported once)", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"VERSION", JournalFile}) {
		t.Errorf("directory holds %q, want VERSION and %s", names, JournalFile)
	}
}

// TestV1FileName: the version 1 names a conversion expects, for keys with every kind of
// byte: a record whose name does not match its key is left out.
func TestV1FileName(t *testing.T) {
	for _, tc := range []struct {
		key  allocation.Key
		want string
	}{
		{allocation.Key{PodUID: uid1, Container: "app"}, uid1 + "_app.json"},
		{allocation.Key{PodUID: "..", Container: "../x"}, "%2E%2E_%2E%2E%2Fx.json"},
		{allocation.Key{PodUID: "a_b", Container: "c"}, "a%5Fb_c.json"},
		{allocation.Key{PodUID: "09AZaz-", Container: "/:@[`{"}, "09AZaz-_%2F%3A%40%5B%60%7B.json"},
		{allocation.Key{PodUID: "%41", Container: "\x00\x7f é"}, "%2541_%00%7F%20%C3%A9.json"},
	} {
		if got := v1FileName(tc.key); got != tc.want {
			t.Errorf("v1FileName(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// TestConvertV1Bounds: a version 1 record of exactly 64 KiB converts; the limit is the
// file's size, whitespace included.
func TestConvertV1Bounds(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "VERSION"), "1\n")
	rec := `{"version":1,"allocation":{"podUID":"a/b","container":"c_d","pool":"shared_b","type":"shared","milliCPU":5}}`
	writeFile(t, filepath.Join(dir, "a%2Fb_c%5Fd.json"), rec+strings.Repeat(" ", maxRecordBytes-len(rec)))
	got := mustLoad(t, mustOpen(t, dir))
	if want := []allocation.Allocation{shared("a/b", "c_d", "shared_b", 5)}; !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
}
