package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/podfence/podfence/internal/cliflags"
	"github.com/podfence/podfence/internal/coresched"
)

func TestPidsOf(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("10\n11\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := pidsOf([]string{"7"}, dir); err != nil || !slices.Equal(got, []int{7, 10, 11}) {
		t.Errorf("pidsOf = %v, %v", got, err)
	}
	for _, tc := range []struct {
		args []string
		dir  string
		err  string
	}{
		{args: []string{"x"}, err: `PID "x": want a positive number`},
		{err: "no process: give PIDs or --cgroup"},
		{dir: filepath.Join(dir, "gone"), err: "flag --cgroup: open "},
	} {
		if _, err := pidsOf(tc.args, tc.dir); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("pidsOf(%q, %q) = %v, want %q", tc.args, tc.dir, err, tc.err)
		}
	}
}

// TestCoreSchedGet runs the command on this process: the host may lack core scheduling, in
// which case every thread reports the kernel's error.
func TestCoreSchedGet(t *testing.T) {
	cmd := newCoreSchedCmd()
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"get", "1"})
	err := cmd.Execute()
	// Columns widen with the longest TID, so compare fields, not spacing.
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 2 || !slices.Equal(strings.Fields(lines[0]), []string{"PID", "TID", "COOKIE"}) ||
		!slices.Equal(append(strings.Fields(lines[1]), "", "")[:2], []string{"1", "1"}) {
		t.Errorf("output %q (err %v)", out.String(), err)
	}
}

func TestCoreSchedFlags(t *testing.T) {
	var f agentFlags
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	addCoreSchedFlags(fs, &f)
	env := map[string]string{"PODFENCE_CORESCHED_POLICY": "best-effort"}
	err := fs.Parse([]string{"--coresched=false", "--coresched-default-group", "pod", "--proc", "/host/proc"})
	if err == nil {
		err = cliflags.FromEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	c := f.cfg.CoreSched
	if err != nil || f.coreSched || c.DefaultGroup != coresched.ByPod || c.Policy != coresched.BestEffort ||
		c.ProcRoot != "/host/proc" || c.ReconcileEvery != 10*time.Second {
		t.Errorf("flags: %+v, on=%v, err %v", c, f.coreSched, err)
	}
	if err := fs.Parse([]string{"--coresched-policy", "lax"}); err == nil || !strings.Contains(err.Error(), "want strict or best-effort") {
		t.Errorf("bad policy: %v", err)
	}
}

// TestCoreSchedKoordinatorFlags: Koordinator's node-wide default group and the QoS knobs,
// from flags and the environment; the QoS default is shown in the flag's help.
func TestCoreSchedKoordinatorFlags(t *testing.T) {
	var f agentFlags
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	addCoreSchedFlags(fs, &f)
	if got, want := fs.Lookup("coresched-qos").DefValue, "LSR=on+expeller,LS=on+expeller,BE=on,SYSTEM=on"; got != want {
		t.Errorf("--coresched-qos default %q, want %q", got, want)
	}
	env := map[string]string{"PODFENCE_CORESCHED_QOS": "SYSTEM=off"}
	err := fs.Parse([]string{"--coresched-default-group", "node", "--coresched-qos", "BE=on+idle"})
	if err == nil {
		err = cliflags.FromEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	c := f.cfg.CoreSched
	if err != nil || c.DefaultGroup != coresched.ByNode || c.QoS.String() != "LSR=on+expeller,LS=on+expeller,BE=on+idle,SYSTEM=on" {
		t.Errorf("flags: default %q qos %q, err %v", c.DefaultGroup, c.QoS.String(), err)
	}
	if err := fs.Parse([]string{"--coresched-qos", "BE=sometimes"}); err == nil || !strings.Contains(err.Error(), `class BE: knobs "sometimes"`) {
		t.Errorf("bad QoS knobs: %v", err)
	}
}

// TestCoreSchedProfilesFlag: the agent reads the webhook's profile file (deploy's) for the
// groups it shares; a labelled group outside them is its namespace's.
func TestCoreSchedProfilesFlag(t *testing.T) {
	var f agentFlags
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	addCoreSchedFlags(fs, &f)
	deployed := "../../deploy/webhook/coresched-profiles.yaml"
	if err := fs.Parse([]string{"--coresched-profiles", deployed}); err != nil {
		t.Fatal(err)
	}
	shared := f.cfg.CoreSched.Shared
	if got, want := shared.String(), "telco-dataplane=telco tenant-a=tenant-a,tenant-a-staging"; got != want {
		t.Errorf("shared groups %q, want %q", got, want)
	}
	for ns, want := range map[string]string{"tenant-a": "group:tenant-a", "tenant-a-staging": "group:tenant-a",
		"tenant-b": "group:tenant-b/tenant-a"} {
		g, err := coresched.GroupFor(coresched.ByNamespace, shared, coresched.Pod{Namespace: ns,
			Labels: map[string]string{coresched.KoordLabelGroup: "tenant-a"}})
		if err != nil || g.ID() != want {
			t.Errorf("%s: group %q, %v; want %q", ns, g.ID(), err, want)
		}
	}
	if got := fs.Lookup("coresched-profiles").Value.String(); got != deployed {
		t.Errorf("flag value %q", got)
	}

	bad := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(bad, []byte("- {group: 'a b'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := fs.Parse([]string{"--coresched-profiles", bad})
	if want := `invalid argument "` + bad + `" for "--coresched-profiles" flag: core-scheduling profiles ` + bad +
		`: profile 0: label podfence.io/core-sched-group="a b": group name has the character ' ' (want letters, digits, '-', '_' ` +
		`or '.')`; err == nil || err.Error() != want {
		t.Errorf("bad profiles: %v\nwant %s", err, want)
	}
	if err := fs.Parse([]string{"--coresched-profiles", ""}); err != nil || f.cfg.CoreSched.Shared.Len() != 0 {
		t.Errorf("empty: %v, %v: want no shared group", err, f.cfg.CoreSched.Shared)
	}
}
