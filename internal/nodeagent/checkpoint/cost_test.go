package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestPutWritesOnlyItsFile checks the proportional-cost property: a Put touches no other record.
func TestPutWritesOnlyItsFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		put     allocation.Key
		replace bool
	}{
		{name: "new record", put: allocation.Key{PodUID: uid2, Container: "new"}},
		{name: "replace record", put: allocation.Key{PodUID: uid1, Container: "c7"}, replace: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, t.TempDir())
			for i := range 20 {
				if err := s.Put(shared(uid1, fmt.Sprintf("c%d", i), "shared_b", int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
			before := map[string]syscall.Stat_t{}
			entries, err := os.ReadDir(s.Dir())
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				path := filepath.Join(s.Dir(), e.Name())
				if err := os.Chtimes(path, old, old); err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(path, &st); err != nil {
					t.Fatal(err)
				}
				before[e.Name()] = st
			}
			if err := s.Put(shared(tc.put.PodUID, tc.put.Container, "shared_b", 999)); err != nil {
				t.Fatal(err)
			}
			target := fileName(tc.put)
			entries, err = os.ReadDir(s.Dir())
			if err != nil {
				t.Fatal(err)
			}
			if want := len(before) + map[bool]int{false: 1, true: 0}[tc.replace]; len(entries) != want {
				t.Errorf("directory holds %d entries after Put, want %d", len(entries), want)
			}
			for _, e := range entries {
				var st syscall.Stat_t
				if err := syscall.Stat(filepath.Join(s.Dir(), e.Name()), &st); err != nil {
					t.Fatal(err)
				}
				b, existed := before[e.Name()]
				switch {
				case e.Name() == target && existed && st.Ino == b.Ino:
					t.Errorf("%s: replaced in place (inode %d kept), want a new file renamed over it", e.Name(), st.Ino)
				case e.Name() == target:
				case !existed:
					t.Errorf("Put created unexpected file %s", e.Name())
				case st.Ino != b.Ino || st.Mtim != b.Mtim || st.Size != b.Size:
					t.Errorf("Put changed %s: inode %d→%d, mtime %v→%v", e.Name(), b.Ino, st.Ino, b.Mtim, st.Mtim)
				}
			}
		})
	}
}

func BenchmarkPut(b *testing.B) {
	for _, existing := range []int{0, 1000} {
		b.Run(fmt.Sprintf("existing=%d", existing), func(b *testing.B) {
			s := mustOpen(b, b.TempDir())
			for i := range existing {
				if err := s.Put(exclusive(b, uid2, fmt.Sprintf("c%d", i), "exclusive_a", "4-5", "")); err != nil {
					b.Fatal(err)
				}
			}
			a := exclusive(b, uid1, "app", "exclusive_a", "4-5", "12-13")
			for b.Loop() {
				if err := s.Put(a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
