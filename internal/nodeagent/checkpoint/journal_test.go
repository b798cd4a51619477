package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

func putLine(t testing.TB, a allocation.Allocation) string {
	t.Helper()
	b, err := encodePut(a)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func delLine(t testing.TB, k allocation.Key) string {
	t.Helper()
	b, err := encodeDel(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoadDamagedLines: every line Load cannot read is left out and reported with its line
// number and problem; the readable changes replay in order; the journal is then rewritten
// with the live records only, and a second Load finds nothing wrong.
func TestLoadDamagedLines(t *testing.T) {
	a := shared(uid1, "a", "shared_b", 100)
	b := exclusive(t, uid2, "b", "exclusive_a", "4-5", "12-13")
	journal := putLine(t, a) + // 1
		"\x00garbage\n" + // 2
		`{"put":{"podUID":"u","container":"c"},"extra":1}` + "\n" + // 3
		`{"put":{"podUID":"u","container":"c"},"del":{"podUID":"u","container":"c"}}` + "\n" + // 4
		"{}\n" + // 5
		`{"put":{"podUID":"u","container":"c","cpus":"3-1"}}` + "\n" + // 6
		`{"put":{"podUID":"u","container":"c"}} {}` + "\n" + // 7
		"\n" + // 8: blank, skipped
		putLine(t, b) + // 9
		delLine(t, a.Key()) // 10
	s := mustOpen(t, t.TempDir())
	path := filepath.Join(s.Dir(), JournalFile)
	writeFile(t, path, journal)
	got, err := s.Load()
	if want := []allocation.Allocation{b}; !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
	line := func(n int, problem string) string {
		return fmt.Sprintf("checkpoint journal %s line %d: %s: left out; its container is rebuilt from the runtime", path, n, problem)
	}
	want := "load checkpoint " + s.Dir() + ": " + strings.Join([]string{
		line(2, "decode JSON: invalid character '\\x00' looking for beginning of value"),
		line(3, `decode JSON: json: unknown field "extra"`),
		line(4, `holds both "put" and "del"`),
		line(5, `holds neither "put" nor "del"`),
		line(6, `decode JSON: field cpus "3-1": cpu list "3-1": entry "3-1": range end 1 is below its start 3`),
		line(7, "decode JSON: data after the change"),
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Load error =\n%v\nwant\n%s", err, want)
	}
	if lines := journalLines(t, s); !slices.Equal(lines, []string{strings.TrimSuffix(putLine(t, b), "\n")}) {
		t.Errorf("journal after Load holds %q, want b's record alone", lines)
	}
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{b}) {
		t.Errorf("second Load() = %+v, want b", got)
	}
}

// TestCutLastLine: a journal whose last line a crash cut short does not swallow the next
// change: Open ends the line, the cut line is reported, the new change is read.
func TestCutLastLine(t *testing.T) {
	a, b := shared(uid1, "a", "shared_b", 100), shared(uid2, "b", "shared_b", 200)
	dir := t.TempDir()
	mustOpen(t, dir)
	path := filepath.Join(dir, JournalFile)
	full := putLine(t, a) + putLine(t, b)
	writeFile(t, path, full[:len(full)-20])
	s := mustOpen(t, dir)
	c := shared(uid2, "c", "shared_b", 300)
	if err := s.Put(c); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if want := []allocation.Allocation{a, c}; !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), path+" line 2: decode JSON: unexpected EOF") {
		t.Errorf("Load error = %v, want line 2 reported", err)
	}
	// Without Open's newline (a reader of the file as it was): the cut line is reported as such.
	writeFile(t, path, full[:len(full)-20])
	_, problems, err := readJournal(path)
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0].Error(), "line 2: line is cut short (no newline") {
		t.Errorf("readJournal = %v, %v; want line 2 cut short", problems, err)
	}
}

// hugeLine is a put line of about size bytes whose CPU list repeats "0-8191": the 2.8 MB
// record that once took 11.7 s to load.
func hugeLine(size int) string {
	head := `{"put":{"podUID":"` + uid1 + `","container":"app","pool":"exclusive_a","type":"exclusive","cpus":"0`
	return head + strings.Repeat(",0-8191", (size-len(head))/7) + `"}}` + "\n"
}

// TestLongLineUnread: a line over 64 KiB is refused without being held in memory (Load
// allocates far less than its size), and the lines around it still load.
func TestLongLineUnread(t *testing.T) {
	a, b := shared(uid2, "a", "shared_b", 1), shared(uid2, "b", "shared_b", 2)
	s := mustOpen(t, t.TempDir())
	path := filepath.Join(s.Dir(), JournalFile)
	writeFile(t, path, putLine(t, a)+hugeLine(2_800_000)+putLine(t, b))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := s.Load()
	runtime.ReadMemStats(&after)
	want := path + " line 2: line is over 65536 bytes long (a record is under 1 KiB)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load error = %v, want it to contain %q", err, want)
	}
	if !sameAllocs(got, []allocation.Allocation{a, b}) {
		t.Errorf("Load() = %+v, want a and b", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("Load allocated %d bytes to refuse a 2.8 MB line, want under 1 MiB", alloc)
	}
}

// BenchmarkLoadHugeLine: loading a journal holding one line of the given size whose CPU
// list repeats "0-8191" (refused over 64 KiB; parsed in time linear in its size under it).
func BenchmarkLoadHugeLine(b *testing.B) {
	for _, size := range []int{60 << 10, 2_800_000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			s := mustOpen(b, b.TempDir())
			for b.Loop() {
				b.StopTimer()
				writeFile(b, filepath.Join(s.Dir(), JournalFile), hugeLine(size))
				b.StartTimer()
				_, _ = s.Load()
			}
		})
	}
}

// TestJournalOverLimit: a journal over maxJournalBytes is not read: Load reports it and
// starts a new one, which takes changes again.
func TestJournalOverLimit(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	path := filepath.Join(s.Dir(), JournalFile)
	if err := os.WriteFile(path, []byte(putLine(t, shared(uid1, "a", "shared_b", 1))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, maxJournalBytes); err != nil { // sparse: nothing to write
		t.Fatal(err)
	}
	// At the limit it is read: its first line loads, the zeros after it are one long line.
	if got, err := readJournalAt(t, path); len(got) != 1 || err == nil || !strings.Contains(err.Error(), "line 2: line is over") {
		t.Errorf("a journal of exactly %d bytes: %d records, %v; want it read", maxJournalBytes, len(got), err)
	}
	if err := os.Truncate(path, maxJournalBytes+1); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	want := fmt.Sprintf("checkpoint journal %s is %d bytes, over the limit of %d bytes: left unread and started anew",
		path, maxJournalBytes+1, maxJournalBytes)
	if len(got) != 0 || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load() = %+v, %v; want none and %q", got, err, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("journal after Load: %v, %v; want empty", fi, err)
	}
	b := shared(uid2, "b", "shared_b", 2)
	if err := s.Put(b); err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{b}) {
		t.Errorf("Load() = %+v, want b", got)
	}
}

func readJournalAt(t *testing.T, path string) (map[allocation.Key]allocation.Allocation, error) {
	t.Helper()
	live, problems, err := readJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	return live, errors.Join(problems...)
}

// TestJournalBounded: 10,000 changes over 10 live records never leave the journal longer
// than twice its live records plus compactSlack, and what it holds is what was written last.
func TestJournalBounded(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	live := map[allocation.Key]allocation.Allocation{}
	for i := range 10_000 {
		k := allocation.Key{PodUID: uid1, Container: strconv.Itoa(i % 10)}
		if i%3 == 2 {
			if err := s.WriteBatch(nil, []allocation.Key{k}); err != nil {
				t.Fatal(err)
			}
			delete(live, k)
		} else {
			a := shared(k.PodUID, k.Container, "shared_b", int64(i))
			if err := s.WriteBatch([]allocation.Allocation{a}, nil); err != nil {
				t.Fatal(err)
			}
			live[k] = a
		}
		if i%1000 == 999 {
			if n := len(journalLines(t, s)); n > 2*10+compactSlack {
				t.Fatalf("after %d changes the journal holds %d lines, want at most %d", i+1, n, 2*10+compactSlack)
			}
		}
	}
	want := slices.SortedFunc(func(yield func(allocation.Allocation) bool) {
		for _, a := range live {
			if !yield(a) {
				return
			}
		}
	}, func(a, b allocation.Allocation) int { return compareKeys(a.Key(), b.Key()) })
	if got := mustLoad(t, mustOpen(t, s.Dir())); !sameAllocs(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}
}

// TestChangeIsOneAppend: with 1,000 records, a change appends its line and leaves every
// byte before it as it was (no rewrite), so its cost does not grow with the records.
func TestChangeIsOneAppend(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	var batch []allocation.Allocation
	for i := range 1000 {
		batch = append(batch, shared(uid1, strconv.Itoa(i), "shared_b", int64(i)))
	}
	if err := s.WriteBatch(batch, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir(), JournalFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := shared(uid2, "new", "shared_b", 7)
	if err := s.WriteBatch([]allocation.Allocation{a}, []allocation.Key{batch[3].Key()}); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(before) + putLine(t, a) + delLine(t, batch[3].Key()); string(after) != want {
		t.Errorf("journal after one batch: %d bytes, want the %d before plus two lines", len(after), len(before))
	}
}

// TestRecordSizeLimit: a record whose line is exactly 64 KiB (newline included) is written
// and read back; one a byte longer is refused.
func TestRecordSizeLimit(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	a := shared(uid1, "app", "shared_b", 1)
	a.Namespace = strings.Repeat("n", 64<<10-len(putLine(t, a))-len(`"namespace":"",`))
	if n := len(putLine(t, a)); n != 64<<10 {
		t.Fatalf("line is %d bytes, want 65536", n)
	}
	if err := s.Put(a); err != nil {
		t.Fatalf("Put of a 65536-byte line: %v", err)
	}
	if got := mustLoad(t, mustOpen(t, s.Dir())); !sameAllocs(got, []allocation.Allocation{a}) {
		t.Errorf("Load() of the 65536-byte line = %d records, want it", len(got))
	}
	b := a
	b.Namespace += "n"
	want := `checkpoint container "app" of pod "` + uid1 + `": record is 65537 bytes, over the limit of 65536 bytes`
	if err := s.Put(b); err == nil || err.Error() != want {
		t.Errorf("Put of a 65537-byte line: %v, want %s", err, want)
	}
	// Written by hand, it is refused by Load.
	writeFile(t, filepath.Join(s.Dir(), JournalFile), putLine(t, a)[:0]+strings.TrimSuffix(putLine(t, a), "\n")+"n\n")
	if got, err := s.Load(); len(got) != 0 || err == nil || !strings.Contains(err.Error(), "line 1: line is over 65536 bytes long") {
		t.Errorf("Load() of a 65537-byte line = %d records, %v; want it refused", len(got), err)
	}
}

func TestLoadRemovesTempFiles(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	a := exclusive(t, uid1, "app", "exclusive_a", "4", "")
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	// What a crash between CreateTemp and rename leaves behind.
	for _, name := range []string{JournalFile + ".123.tmp", "VERSION.5.tmp"} {
		writeFile(t, filepath.Join(s.Dir(), name), `{"put":{"podU`)
	}
	writeFile(t, filepath.Join(s.Dir(), "README"), "not a record") // ignored, kept
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{a}) {
		t.Errorf("Load() = %+v, want %+v", got, a)
	}
	want := []string{"README", "VERSION", JournalFile}
	if names := dirNames(t, s.Dir()); !slices.Equal(names, want) {
		t.Errorf("directory after Load holds %q, want %q", names, want)
	}
}
