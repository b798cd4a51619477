package topology_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/cpu/topology"
)

func TestParseKernelCPUList(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "", want: ""},
		{in: "2-5", want: "2-5"},
		{in: "1,3 , 5-6,,", want: "1,3,5-6"},
		{in: "all", want: "0-15"},
		{in: "N", want: "15"},
		{in: "8-N", want: "8-15"},
		{in: "0-15:2/4", want: "0-1,4-5,8-9,12-13"},
		{in: "all:1/8", want: "0,8"},
		{in: "0-9:0/3", want: ""},
		{in: "0-3,0-1:1/2", want: "0-3"},
		{in: "3-1", err: `cpu list "3-1": region "3-1": range end 1 is below its start 3`},
		{in: "0-15:3/2", err: `cpu list "0-15:3/2": region "0-15:3/2": pattern "3/2": want used/group with 0 < group and used <= group`},
		{in: "0-15:1/0", err: `pattern "1/0": want used/group with 0 < group and used <= group`},
		{in: "0-15:2", err: `pattern "2": want used/group, e.g. 0-15:2/4`},
		{in: "0x3", err: `"0x3" is not a number (want a decimal from 0 to 8191, or N for the last CPU)`},
		{in: "-1", err: `"" is not a number`},
		{in: "8192", err: `8192 is above the largest CPU ID allowed (8191)`},
		{in: "0-3:N/4", err: `"N" is not a number`},
	} {
		got, err := topology.ParseKernelCPUList(tc.in, 15)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseKernelCPUList(%q) error = %v, want one containing %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseKernelCPUList(%q) error = %v", tc.in, err)
		case tc.err == "" && got.String() != tc.want:
			t.Errorf("ParseKernelCPUList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, err := topology.ParseKernelCPUList("all", -1); err == nil {
		t.Error(`ParseKernelCPUList("all") on a node without CPUs: no error`)
	}
}

func TestCmdlineIsolation(t *testing.T) {
	present := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for _, tc := range []struct {
		name, cmdline, want string
		warnings            []string // each in turn contained in a warning
	}{
		{name: "none", cmdline: "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n", want: "none"},
		{name: "plain list means domain", cmdline: "isolcpus=2-5", want: "isolcpus domain 2-5 (not load balanced)"},
		{name: "explicit domain", cmdline: "isolcpus=domain,2-5", want: "isolcpus domain 2-5 (not load balanced)"},
		{name: "flags without domain keep balancing", cmdline: "isolcpus=nohz,managed_irq,2-5",
			want: "nohz_full 2-5, rcu_nocbs 2-5, managed_irq 2-5"},
		{name: "nohz_full implies rcu_nocbs", cmdline: "nohz_full=4-7 rcu_nocbs=1", want: "nohz_full 4-7, rcu_nocbs 1,4-7"},
		{name: "rcu_nocbs without a value offloads nothing at boot", cmdline: "rcu_nocbs", want: "none"},
		{name: "dashes, quotes, N and patterns", cmdline: `rcu-nocbs="8-N" isolcpus="managed_irq,domain,0-N:1/8"`,
			want: "isolcpus domain 0,8 (not load balanced), rcu_nocbs 8-15, managed_irq 0,8"},
		{name: "all in isolcpus= is a flag to the kernel", cmdline: "isolcpus=all", want: "none",
			warnings: []string{`"isolcpus=all": unknown flag "all" skipped`, `"isolcpus=all": no CPU list after the flags`}},
		{name: "init's arguments are not the kernel's", cmdline: "ro -- isolcpus=3", want: "none"},
		{name: "a quoted value keeps its spaces", cmdline: `foo="a isolcpus=3" nohz_full=2`, want: "nohz_full 2, rcu_nocbs 2"},
		{name: "unknown flag skipped", cmdline: "isolcpus=tick,3", want: "isolcpus domain 3 (not load balanced)",
			warnings: []string{`kernel command line "isolcpus=tick,3": unknown flag "tick" skipped`}},
		{name: "invalid flag: the kernel ignores the parameter", cmdline: "isolcpus=dom4in,3 nohz_full=5", want: "nohz_full 5, rcu_nocbs 5",
			warnings: []string{`kernel command line "isolcpus=dom4in,3": flag "dom4in": want domain, nohz or managed_irq, then a ` +
				`CPU list; the kernel ignores it, so does podfence`}},
		{name: "bad list", cmdline: "nohz_full=7-2", want: "none",
			warnings: []string{`kernel command line "nohz_full=7-2": cpu list "7-2": region "7-2": range end 2 is below its start 7; ` +
				`the kernel ignores it`}},
		{name: "flags only", cmdline: "isolcpus=nohz", want: "none", warnings: []string{"no CPU list after the flags"}},
		{name: "absent CPUs left out", cmdline: "isolcpus=12-19", want: "isolcpus domain 12-15 (not load balanced)",
			warnings: []string{`kernel command line "isolcpus=12-19": CPUs 16-19 are not present on this node (present: 0-15); left out`}},
		{name: "given twice", cmdline: "isolcpus=2 isolcpus=3", want: "isolcpus domain 2-3 (not load balanced)",
			warnings: []string{"isolcpus= is given more than once"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := topology.CmdlineIsolation(tc.cmdline, present)
			if got := h.Summary(); got != tc.want {
				t.Errorf("Summary = %q, want %q", got, tc.want)
			}
			if len(h.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", h.Warnings, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.Contains(h.Warnings[i], w) {
					t.Errorf("warning %q, want one containing %q", h.Warnings[i], w)
				}
			}
		})
	}
}

// TestDiscoverIsolation: sysfs is what the kernel did and wins over the command line, with a
// warning; what cannot be read is a warning, never an error.
func TestDiscoverIsolation(t *testing.T) {
	const fx = "isolcpus-smt-apart"
	full := "isolcpus domain 2-7,18-23 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23, managed_irq 2-7,18-23"
	for _, tc := range []struct {
		name, fixture, glob, content string // content "-" removes the file
		noProc                       bool
		want                         string
		warning                      string
	}{
		{name: "as booted", fixture: fx, want: full},
		{name: "no isolation, nohz_full (null)", fixture: "dual-socket-smt-apart", want: "none"},
		{name: "no nohz_full file", fixture: "vm-2cpu-nosmt", want: "none"},
		{name: "the kernel isolated fewer", fixture: fx, glob: "devices/system/cpu/isolated", content: "2-7",
			want:    "isolcpus domain 2-7 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23, managed_irq 2-7,18-23",
			warning: "the kernel command line's isolcpus= (domain) names CPUs 2-7,18-23, but the kernel reports 2-7 in "},
		{name: "the kernel runs no nohz_full", fixture: fx, glob: "devices/system/cpu/nohz_full", content: "",
			want:    "isolcpus domain 2-7,18-23 (not load balanced), rcu_nocbs 2-7,18-23, managed_irq 2-7,18-23",
			warning: "the kernel command line's nohz_full= names CPUs 2-7,18-23, but the kernel reports none in "},
		{name: "no isolated file: the command line", fixture: fx, glob: "devices/system/cpu/isolated", content: "-", want: full},
		{name: "garbage in isolated: the command line", fixture: fx, glob: "devices/system/cpu/isolated", content: "x",
			want: full, warning: `isolated: cpu list "x": entry "x": "x" is not a CPU number`},
		{name: "no cmdline: sysfs alone", fixture: fx, glob: "proc/cmdline", content: "-",
			want:    "isolcpus domain 2-7,18-23 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23",
			warning: "cmdline: no such file or directory; the host's isolation is read from sysfs alone (no managed_irq or rcu_nocbs)"},
		{name: "captured sysfs tree without procfs", fixture: fx, noProc: true,
			want: "isolcpus domain 2-7,18-23 (not load balanced), nohz_full 2-7,18-23, rcu_nocbs 2-7,18-23"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir() // the files DiscoverIsolation reads, not the whole tree
			sys, proc := root+"/sys", root+"/proc"
			copyTree(t, fixture(tc.fixture)+"/devices/system/cpu", sys+"/devices/system/cpu", "isolated", "nohz_full")
			copyTree(t, procFixture(tc.fixture), proc, "cmdline")
			if tc.glob != "" {
				edit(t, root, strings.Replace("sys/"+tc.glob, "sys/proc/", "proc/", 1), tc.content)
			}
			if tc.noProc {
				proc = ""
			}
			present, err := topology.ParseCPUList(readFile(t, fixture(tc.fixture)+"/devices/system/cpu/present"))
			if err != nil {
				t.Fatal(err)
			}
			h := topology.DiscoverIsolation(sys, proc, present)
			if got := h.Summary(); got != tc.want {
				t.Errorf("Summary = %q, want %q", got, tc.want)
			}
			switch {
			case tc.warning == "" && len(h.Warnings) > 0:
				t.Errorf("warnings %q, want none", h.Warnings)
			case tc.warning != "" && (len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], tc.warning)):
				t.Errorf("warnings %q, want one containing %q", h.Warnings, tc.warning)
			}
		})
	}
}

func TestIsolationLists(t *testing.T) {
	if l := topology.NoIsolation().Lists(); l != nil {
		t.Errorf("Lists of no isolation = %+v, want nil", l)
	}
	h := topology.CmdlineIsolation("isolcpus=nohz,3 rcu_nocbs=1", cpuset.New(0, 1, 2, 3))
	l := h.Lists()
	if l == nil || l.Domain != "" || l.NoHZFull != "3" || l.RCUNoCBs != "1,3" || l.ManagedIRQ != "" {
		t.Errorf("Lists = %+v", l)
	}
	if got := h.Isolated().String(); got != "3" {
		t.Errorf("Isolated = %q, want 3 (rcu_nocbs alone does not isolate)", got)
	}
}
