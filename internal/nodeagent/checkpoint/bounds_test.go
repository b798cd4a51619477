package checkpoint

import (
	"encoding/json"
	"os"
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

// TestNameLengthLimit: a record whose file name is exactly 240 bytes (the longest whose temp
// file name fits in 255) is written, read back and deleted, by Put/Delete and by WriteBatch;
// one byte longer is refused by Put and WriteBatch, and its Delete is a no-op.
func TestNameLengthLimit(t *testing.T) {
	key := func(nameLen int) allocation.Key { // "u_<container>.json"
		return allocation.Key{PodUID: "u", Container: strings.Repeat("c", nameLen-len("u_.json"))}
	}
	for _, batch := range []bool{false, true} {
		s := mustOpen(t, t.TempDir())
		put := s.Put
		del := s.Delete
		if batch {
			put = func(a allocation.Allocation) error { return s.WriteBatch([]allocation.Allocation{a}, nil) }
			del = func(k allocation.Key) error { return s.WriteBatch(nil, []allocation.Key{k}) }
		}
		longest := shared("u", key(240).Container, "shared_b", 1)
		if n := len(fileName(longest.Key())); n != 240 {
			t.Fatalf("file name is %d bytes, want 240", n)
		}
		if err := put(longest); err != nil {
			t.Fatalf("batch=%v: put of a 240-byte name: %v", batch, err)
		}
		if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{longest}) {
			t.Errorf("batch=%v: Load() = %+v, want the 240-byte name", batch, got)
		}
		over := shared("u", key(241).Container, "shared_b", 1)
		want := `checkpoint container "` + over.Container + `" of pod "u": file name is 241 bytes, over the limit of 240`
		if err := put(over); err == nil || err.Error() != want {
			t.Errorf("batch=%v: put of a 241-byte name: %v, want %s", batch, err, want)
		}
		if err := del(over.Key()); err != nil {
			t.Errorf("batch=%v: delete of a 241-byte name: %v", batch, err)
		}
		if err := del(longest.Key()); err != nil {
			t.Errorf("batch=%v: delete of a 240-byte name: %v", batch, err)
		}
		if got := mustLoad(t, s); len(got) != 0 {
			t.Errorf("batch=%v: after the deletes Load() = %+v, want none", batch, got)
		}
	}
}

// TestRecordSizeLimit: Put writes a record of exactly 64 KiB (newline included), which Load
// reads back, and refuses one a byte longer.
func TestRecordSizeLimit(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	a := shared(uid1, "app", "shared_b", 1)
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), fileName(a.Key())))
	if err != nil {
		t.Fatal(err)
	}
	a.Namespace = strings.Repeat("n", 64<<10-int(fi.Size())-len(`"namespace":"",`))
	if err := s.Put(a); err != nil {
		t.Fatalf("Put of a 65536-byte record: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir(), fileName(a.Key()))); err != nil || fi.Size() != 64<<10 {
		t.Fatalf("record file: %v, %v; want 65536 bytes", fi, err)
	}
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{a}) {
		t.Errorf("Load() of the 65536-byte record = %d records, want it", len(got))
	}
	b := a
	b.Namespace += "n"
	// The same size without the final newline, written by hand: Load reads every byte of it.
	data, err := json.Marshal(record{Version: Version, Allocation: &b})
	if err != nil || len(data) != 64<<10 {
		t.Fatalf("hand-written record: %d bytes, %v; want 65536", len(data), err)
	}
	writeFile(t, filepath.Join(s.Dir(), fileName(b.Key())), string(data))
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{b}) {
		t.Errorf("Load() of a 65536-byte record without a newline = %d records, want it", len(got))
	}
	want := `checkpoint container "app" of pod "` + uid1 + `": record is 65537 bytes, over the limit of 65536 bytes`
	if err := s.Put(b); err == nil || err.Error() != want {
		t.Errorf("Put of a 65537-byte record: %v, want %s", err, want)
	}
	if got := mustLoad(t, s); !sameAllocs(got, []allocation.Allocation{b}) {
		t.Errorf("after the refused Put, Load() = %d records, want the 65536-byte one", len(got))
	}
}
