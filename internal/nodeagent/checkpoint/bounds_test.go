package checkpoint

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// hugeRecord is a record of about size bytes whose CPU list repeats "0-8191": the 2.8 MB
// record that once took 11.7 s to load.
func hugeRecord(size int) string {
	head := `{"version":1,"allocation":{"podUID":"` + uid1 + `","container":"app","pool":"exclusive_a","type":"exclusive","cpus":"0`
	return head + strings.Repeat(",0-8191", (size-len(head))/7) + `"}}`
}

// TestLoadHugeRecordUnread: a record over the limit is refused without being read (Load
// allocates far less than its size), and the other records still load.
func TestLoadHugeRecordUnread(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	ok := shared(uid2, "ok", "shared_b", 1)
	if err := s.Put(ok); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.Dir(), uid1+"_app.json")
	huge := hugeRecord(2_800_000)
	writeFile(t, file, huge)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := s.Load()
	runtime.ReadMemStats(&after)
	want := "checkpoint record " + file + ": file is " + strconv.Itoa(len(huge)) + " bytes, over the limit of 65536 bytes"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load error = %v, want it to contain %q", err, want)
	}
	if !sameAllocs(got, []allocation.Allocation{ok}) {
		t.Errorf("Load() = %+v, want %+v", got, ok)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("Load allocated %d bytes to refuse a %d-byte record, want under 1 MiB", alloc, len(huge))
	}
}

// TestPutRefusesOversizedRecord: Put never writes a record that Load would refuse.
func TestPutRefusesOversizedRecord(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	a := shared(uid1, "app", "shared_b", 1)
	a.Namespace = strings.Repeat("n", 64<<10)
	want := `checkpoint container "app" of pod "` + uid1 + `": record is 65693 bytes, over the limit of 65536 bytes`
	if err := s.Put(a); err == nil || err.Error() != want {
		t.Errorf("Put error = %v, want %s", err, want)
	}
	if got := mustLoad(t, s); len(got) != 0 {
		t.Errorf("Load() = %+v, want none", got)
	}
}

// BenchmarkLoadHugeRecord: loading a checkpoint holding one record of the given size whose
// CPU list repeats "0-8191" (refused over 64 KiB; parsed in time linear in its size under it).
func BenchmarkLoadHugeRecord(b *testing.B) {
	for _, size := range []int{60 << 10, 2_800_000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			s := mustOpen(b, b.TempDir())
			writeFile(b, filepath.Join(s.Dir(), uid1+"_app.json"), hugeRecord(size))
			for b.Loop() {
				_, _ = s.Load()
			}
		})
	}
}
