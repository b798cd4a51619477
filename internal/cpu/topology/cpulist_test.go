package topology_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "empty", in: "", want: ""},
		{name: "only white space", in: " \n", want: ""},
		{name: "sysfs file with newline", in: "0-3,8\n", want: "0-3,8"},
		{name: "single", in: "7", want: "7"},
		{name: "one-CPU range", in: "4-4", want: "4"},
		{name: "unsorted", in: "3,1,2", want: "1-3"},
		{name: "overlapping and repeated", in: "0-2,1-4,4", want: "0-4"},
		{name: "spaces around entries", in: " 1 , 2 ", want: "1-2"},
		{name: "leading zeros", in: "007", want: "7"},
		{name: "largest CPU", in: "8190-8191", want: "8190-8191"},
		{name: "ranges across 64-bit words", in: "62-65,127-128,200-255", want: "62-65,127-128,200-255"},
		{name: "every CPU", in: "0-8191", want: "0-8191"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := topology.ParseCPUList(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("ParseCPUList(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseCPUListErrors(t *testing.T) {
	const notNumber = " is not a CPU number (want N or N-M, N a decimal from 0 to 8191)"
	for _, tc := range []struct{ name, in, want string }{
		{name: "lone comma", in: ",", want: `cpu list ",": empty entry (want N or N-M)`},
		{name: "trailing comma", in: "0-3,", want: `cpu list "0-3,": empty entry (want N or N-M)`},
		{name: "open range", in: "1-", want: `cpu list "1-": entry "1-": ""` + notNumber},
		{name: "negative", in: "-1", want: `cpu list "-1": entry "-1": ""` + notNumber},
		{name: "word", in: "0,cpu1", want: `cpu list "0,cpu1": entry "cpu1": "cpu1"` + notNumber},
		{name: "hex", in: "0x1", want: `cpu list "0x1": entry "0x1": "0x1"` + notNumber},
		{name: "plus sign", in: "+1", want: `cpu list "+1": entry "+1": "+1"` + notNumber},
		{name: "two dashes", in: "1-2-3", want: `cpu list "1-2-3": entry "1-2-3": "2-3"` + notNumber},
		{name: "space inside a range", in: "1 -3", want: `cpu list "1 -3": entry "1 -3": "1 "` + notNumber},
		{name: "descending range", in: "3-1", want: `cpu list "3-1": entry "3-1": range end 1 is below its start 3`},
		{name: "above the largest ID", in: "0-8192",
			want: `cpu list "0-8192": entry "0-8192": CPU 8192 is above the largest CPU ID allowed (8191)`},
		{name: "beyond int", in: "99999999999999999999",
			want: `cpu list "99999999999999999999": entry "99999999999999999999": CPU 99999999999999999999 is above the largest CPU ` +
				`ID allowed (8191)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := topology.ParseCPUList(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("ParseCPUList(%q) error = %v\nwant %s", tc.in, err, tc.want)
			}
			if got.Size() != 0 {
				t.Errorf("ParseCPUList(%q) = %q with an error, want empty", tc.in, got)
			}
		})
	}
}

// BenchmarkParseCPUList: a list of repeated whole ranges, as in a 2.8 MB checkpoint record
// that took 11.7 s to load when each range was filled one CPU at a time.
func BenchmarkParseCPUList(b *testing.B) {
	for _, size := range []int{64 << 10, 2800000} {
		s := strings.Repeat("0-8191,", size/7) + "0"
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if _, err := topology.ParseCPUList(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
