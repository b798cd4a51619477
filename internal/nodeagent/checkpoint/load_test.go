package checkpoint

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestLoadCorrupt: a bad record is reported with its path, the problem and what to do, and
// left out; the other records still load.
func TestLoadCorrupt(t *testing.T) {
	name := uid1 + "_app.json"
	hint := ": repair the file, or delete it if its container no longer runs"
	for _, tc := range []struct {
		name    string
		file    string
		content string
		wantErr string // after "load checkpoint <dir>: checkpoint record <dir>/<file>: "
	}{
		{name: "truncated", content: `{"version":1,"allocation":{"podUID"`, wantErr: "decode JSON: unexpected EOF"},
		{name: "not JSON", content: "\x00garbage", wantErr: "decode JSON: invalid character '\\x00' looking for beginning of value"},
		{name: "empty file", content: "", wantErr: "decode JSON: EOF"},
		{name: "trailing data", content: `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app"}}}`,
			wantErr: "decode JSON: data after the record"},
		{name: "unknown field", content: `{"version":1,"alloc":{}}`, wantErr: `decode JSON: json: unknown field "alloc"`},
		{name: "newer version", content: `{"version":2,"allocation":{}}`, wantErr: "record version is 2, this podfence reads version 1"},
		{name: "no version", content: `{"allocation":{}}`, wantErr: "record version is 0, this podfence reads version 1"},
		{name: "no allocation", content: `{"version":1}`, wantErr: "no allocation"},
		{name: "null allocation", content: `{"version":1,"allocation":null}`, wantErr: "no allocation"},
		{name: "bad cpus", content: `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app","cpus":"3-1"}}`,
			wantErr: `decode JSON: field cpus "3-1": cpu list "3-1": entry "3-1": range end 1 is below its start 3`},
		{name: "CPU above the largest ID", content: `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app","cpus":"0-2000000"}}`,
			wantErr: `decode JSON: field cpus "0-2000000": cpu list "0-2000000": entry "0-2000000": CPU 2000000 is above the largest ` +
				`CPU ID allowed (8191)`},
		{name: "over the size limit",
			content: `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app"}}` + strings.Repeat(" ", 64<<10),
			wantErr: "file is 65630 bytes, over the limit of 65536 bytes (a record is under 1 KiB)"},
		{name: "renamed file", file: uid2 + "_app.json", content: `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app"}}`,
			wantErr: `holds container "app" of pod "` + uid1 + `", whose file name is ` + name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			ok := shared(uid2, "ok", "shared_b", 1)
			if err := s.Put(ok); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(s.Dir(), cmp.Or(tc.file, name))
			writeFile(t, file, tc.content)
			want := "load checkpoint " + s.Dir() + ": checkpoint record " + file + ": " + tc.wantErr + hint
			got, err := s.Load()
			if err == nil || err.Error() != want {
				t.Fatalf("Load error = %v\nwant %s", err, want)
			}
			if want := []allocation.Allocation{ok}; !sameAllocs(got, want) {
				t.Errorf("Load() = %+v, want %+v", got, want)
			}
		})
	}
}

func TestLoadReportsEveryBadRecord(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	writeFile(t, filepath.Join(s.Dir(), "a_b.json"), "{")
	writeFile(t, filepath.Join(s.Dir(), "c_d.json"), `{"version":1}`)
	hint := ": repair the file, or delete it if its container no longer runs"
	want := "load checkpoint " + s.Dir() + ": checkpoint record " + s.Dir() + "/a_b.json: decode JSON: unexpected EOF" + hint +
		"\ncheckpoint record " + s.Dir() + "/c_d.json: no allocation" + hint
	if _, err := s.Load(); err == nil || err.Error() != want {
		t.Errorf("Load error = %v\nwant %s", err, want)
	}
}

func TestLoadRemovesTempFiles(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	a := exclusive(t, uid1, "app", "exclusive_a", "4", "")
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	// What a crash between CreateTemp and rename leaves behind: a partial or a complete record.
	for _, name := range []string{uid1 + "_app.json.123.tmp", uid2 + "_x.json.9.tmp", "VERSION.5.tmp"} {
		writeFile(t, filepath.Join(s.Dir(), name), `{"version":1,"allo`)
	}
	writeFile(t, filepath.Join(s.Dir(), "README"), "not a record") // ignored, kept
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{a}) {
		t.Errorf("Load() = %+v, want %+v", got, a)
	}
	want := []string{uid1 + "_app.json", "README", "VERSION"}
	if names := dirNames(t, s.Dir()); !slices.Equal(names, want) {
		t.Errorf("directory after Load holds %q, want %q", names, want)
	}
}

// TestLoadFixture pins the on-disk format: a checkpoint written by format version 1.
func TestLoadFixture(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1")); err != nil {
		t.Fatal(err)
	}
	app := exclusive(t, uid1, "app", "exclusive_a", "4-5", "12-13")
	app.SharedPool, app.MilliCPU = "shared_b", 100
	want := []allocation.Allocation{
		app,
		shared(uid1, "sidecar", "shared_b", 250),
		{PodUID: uid2, Namespace: "kube-system", Pod: "dns", Container: "pause", Pool: "default", Type: allocation.TypeDefault},
	}
	if got := mustLoad(t, mustOpen(t, dir)); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
}
