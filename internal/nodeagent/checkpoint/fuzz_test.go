package checkpoint

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// FuzzLoadRecord feeds arbitrary bytes to the record decoder Load uses. It must not panic,
// every error must name the file, it must refuse input over maxRecordBytes, and whatever it
// accepts must survive a write and re-read.
func FuzzLoadRecord(f *testing.F) {
	for _, seed := range []string{
		`{"version":1,"allocation":{"podUID":"u","container":"c","pool":"exclusive_a","type":"exclusive","cpus":"4-5","idled":"12"}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","pool":"shared_b","type":"shared","milliCPU":250}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","cpus":"0-8191"}}`,
		`{"version":2,"allocation":{}}`,
		`{"version":1,"allocation":null}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c"}} {}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","cpus":"3-1"}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","cpus":"0-2000000"}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c","cpus":"0-8191` + strings.Repeat(",0-8191", 9000) + `"}}`,
		`{"version":1,"allocation":{"podUID":"u","container":"c"}}` + strings.Repeat(" ", maxRecordBytes),
		"",
		"\x00",
	} {
		f.Add([]byte(seed))
	}
	path := filepath.Join("/ckpt", fileName(allocation.Key{PodUID: "u", Container: "c"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeRecord(path, b)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error does not name %s: %v", path, err)
			}
			return
		}
		if len(b) > maxRecordBytes {
			t.Fatalf("accepted a %d-byte record, over the limit of %d", len(b), maxRecordBytes)
		}
		out, err := json.Marshal(record{Version: Version, Allocation: &a})
		if err != nil {
			t.Fatalf("re-encode %+v: %v", a, err)
		}
		again, err := decodeRecord(path, out)
		if err != nil {
			t.Fatalf("re-read of %s: %v", out, err)
		}
		if !sameAllocs([]allocation.Allocation{a}, []allocation.Allocation{again}) {
			t.Fatalf("round trip changed %+v to %+v", a, again)
		}
	})
}
