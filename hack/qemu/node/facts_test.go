package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseCgroupV2(t *testing.T) {
	for _, tc := range []struct{ name, in, want, wantErr string }{
		{name: "v2 only", in: "0::/kubepods/burstable/pod1/c1\n", want: "/kubepods/burstable/pod1/c1"},
		{name: "hybrid: the unified line among v1 lines",
			in: "12:cpuset:/a\n1:name=systemd:/b\n0::/kubepods.slice/x.scope\n", want: "/kubepods.slice/x.scope"},
		{name: "root", in: "0::/\n", want: "/"},
		{name: "v1 only", in: "4:cpu,cpuacct:/a\n", wantErr: `no cgroup v2 line "0::/path"`},
		{name: "relative path (another cgroup namespace's view)", in: "0::a\n", wantErr: "no cgroup v2 line"},
		{name: "empty", in: "", wantErr: "no cgroup v2 line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCgroupV2([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseCgroupV2(%q) = %q, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseCgroupV2(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\tsleep\nCpus_allowed:\tf\nCpus_allowed_list:\t2-3\nMems_allowed_list:\t0\n"
	for key, want := range map[string]string{"Cpus_allowed_list": "2-3", "Cpus_allowed": "f", "Name": "sleep"} {
		if got, ok := parseStatus([]byte(status), key); !ok || got != want {
			t.Errorf("parseStatus(%s) = %q, %v; want %q", key, got, ok, want)
		}
	}
	if got, ok := parseStatus([]byte(status), "Cpus"); ok {
		t.Errorf("parseStatus(Cpus) = %q, found; want a whole-key match only", got)
	}
}

func TestParseIDs(t *testing.T) {
	got, err := parseIDs([]byte("12\n345\n"))
	if err != nil || !slices.Equal(got, []int{12, 345}) {
		t.Errorf("parseIDs = %v, %v; want [12 345]", got, err)
	}
	for _, bad := range []string{"12 x", "0", "-3"} {
		if _, err := parseIDs([]byte(bad)); err == nil || !strings.Contains(err.Error(), "want a positive decimal number") {
			t.Errorf("parseIDs(%q): %v; want an error", bad, err)
		}
	}
}

func TestFindLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.log")
	first := "level=INFO msg=synchronized containers=0\n"
	if err := os.WriteFile(file, []byte(first+"level=INFO msg=stopped\nlevel=INFO msg=synchronized containers=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`msg=synchronized`)
	if got, ok := findLine(file, 0, re); !ok || !strings.HasSuffix(got, "containers=0") {
		t.Errorf("from 0: %q, %v; want the first start's line", got, ok)
	}
	if got, ok := findLine(file, int64(len(first)), re); !ok || !strings.HasSuffix(got, "containers=3") {
		t.Errorf("after the first start: %q, %v; want the second start's line", got, ok)
	}
	if got, ok := findLine(file, 1<<20, re); ok {
		t.Errorf("past the end: %q; want nothing", got)
	}
}

func TestReportExpect(t *testing.T) {
	var out bytes.Buffer
	r := &report{out: &out}
	r.expect("shared pool", fact{"cpuset.cpus", "1", "1"}, fact{"cpu.max", "50000 100000", "50000 100000"})
	r.expect("exclusive pool", fact{"cpuset.cpus", "0-3", "2-3"}, fact{"cpu.max", "max 100000", "max 100000"})
	want := "PASS shared pool: cpuset.cpus=1 cpu.max=50000 100000\n" +
		"FAIL exclusive pool: cpuset.cpus=0-3 (want 2-3)\n"
	if out.String() != want || r.passed != 1 || r.failed != 1 {
		t.Errorf("printed %q (%d passed, %d failed); want %q (1, 1)", out.String(), r.passed, r.failed, want)
	}
}

func FuzzParseCgroupV2(f *testing.F) {
	f.Add([]byte("0::/kubepods/pod1/c1\n"))
	f.Add([]byte("12:cpuset:/a\n0::/\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseCgroupV2(b)
		if err == nil && (!strings.HasPrefix(p, "/") || strings.Contains(p, "\n")) {
			t.Errorf("parseCgroupV2(%q) = %q: want an absolute path on one line", b, p)
		}
	})
}

func FuzzParseIDs(f *testing.F) {
	f.Add([]byte("1 2\n3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := parseIDs(b)
		for _, id := range ids {
			if err == nil && id <= 0 {
				t.Errorf("parseIDs(%q) = %v: want positive IDs", b, ids)
			}
		}
	})
}

func TestCPUMaxOf(t *testing.T) {
	const prefix = `level=INFO msg=decision event=CreateContainer pod=tenant/b1 container=app pool=exclusive_a type=exclusive cpus=2-3 mems=0 `
	for _, tc := range []struct{ in, want, wantErr string }{
		{in: prefix + "quota=0 period=0 existing=false", want: "max 100000"},
		{in: prefix + "quota=110000 period=100000 existing=false", want: "110000 100000"},
		{in: prefix + "quota=50000 period=100000", want: "50000 100000"},
		{in: prefix + "quota=-5 period=100000", wantErr: `quota "-5": want a non-negative number`},
		{in: prefix + "period=100000", wantErr: "want quota=<µs> period=<µs>"},
	} {
		got, err := cpuMaxOf(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("cpuMaxOf(...%s) = %q, %v; want error %q", tc.in[len(prefix):], got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cpuMaxOf(...%s) = %q, %v; want %q", tc.in[len(prefix):], got, err, tc.want)
		}
	}
}
