package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// FuzzJournal replays arbitrary bytes as a journal. It must not panic, every problem must
// name the journal and a line, and the records it accepts, written as a journal again, must
// replay to the same records with no problem (what Load's rewrite does).
func FuzzJournal(f *testing.F) {
	for _, seed := range []string{
		`{"put":{"podUID":"u","container":"c","pool":"exclusive_a","type":"exclusive","cpus":"4-5","idled":"12"}}` + "\n",
		`{"put":{"podUID":"u","container":"c","pool":"shared_b","type":"shared","milliCPU":250}}` + "\n" +
			`{"del":{"podUID":"u","container":"c"}}` + "\n",
		`{"put":{"podUID":"u","container":"c","cpus":"0-8191"}}`,
		`{"put":{},"del":{}}` + "\n",
		`{}` + "\n\n\n",
		`{"put":{"podUID":"u","container":"c","cpus":"3-1"}}` + "\n",
		`{"put":{"podUID":"u","container":"c"}} {}` + "\n",
		`{"put":{"podUID":"u","container":"c","cpus":"0-8191` + strings.Repeat(",0-8191", 9500) + `"}}` + "\n",
		"\x00\n\xff\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	path, again := filepath.Join(dir, JournalFile), filepath.Join(dir, "again")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		live, problems, err := readJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if !strings.HasPrefix(p.Error(), "checkpoint journal "+path+" line ") {
				t.Fatalf("problem does not name the journal and line: %v", p)
			}
		}
		var out []byte
		for _, a := range sortedRecords(live) {
			line, err := encodePut(a)
			if err != nil {
				t.Fatalf("accepted %+v, which does not encode: %v", a, err)
			}
			out = append(out, line...)
		}
		if err := os.WriteFile(again, out, 0o600); err != nil {
			t.Fatal(err)
		}
		replayed, problems, err := readJournal(again)
		if err != nil || len(problems) > 0 {
			t.Fatalf("rewritten journal: %v, %v", problems, err)
		}
		if !sameAllocs(sortedRecords(live), sortedRecords(replayed)) {
			t.Fatalf("rewrite changed %+v to %+v", live, replayed)
		}
	})
}

func sortedRecords(m map[allocation.Key]allocation.Allocation) []allocation.Allocation {
	out := make([]allocation.Allocation, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	return out
}

// FuzzV1Record feeds arbitrary bytes to the version 1 record parser Open's conversion uses:
// no panic, and what it accepts goes into a journal line that reads back unchanged.
func FuzzV1Record(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"allocation":{"podUID":"u","container":"c","pool":"exclusive_a","type":"exclusive","cpus":"4-5","idled":"12"}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","cpus":"0-2000000"}}`,
		`{"version":2,"allocation":{}}`,
		`{"version":1,"allocation":null}`,
		"\x00",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseV1Record("u_c.json", b)
		if err != nil {
			return
		}
		line, err := encodePut(a)
		if err != nil {
			if len(b) < maxRecordBytes-len(`{"put":}`) {
				t.Fatalf("accepted %q, which does not encode: %v", b, err)
			}
			return
		}
		c, err := decodeLine(line[:len(line)-1])
		if err != nil || c.Put == nil || !sameAllocs([]allocation.Allocation{a}, []allocation.Allocation{*c.Put}) {
			t.Fatalf("journal line of %+v reads back as %+v, %v", a, c.Put, err)
		}
	})
}
