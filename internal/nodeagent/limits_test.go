package nodeagent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/cpu/plan"
	"github.com/podfence/podfence/internal/cpu/topology"
	"github.com/podfence/podfence/internal/testwait"
)

// logLines is a slog.Handler that sends each record as "message key=value ...".
type logLines chan string

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logLines) WithGroup(string) slog.Handler            { return l }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l <- line
	return nil
}

// TestWatchPoolsRefusesOversizedConfig: a pool config over 1 MiB is refused unread and the
// refusal is logged (naming the file, its size and the limit); the old config stays in
// force (nothing is offered) until the next usable change, which is offered.
func TestWatchPoolsRefusesOversizedConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "poolconfig-a.yaml")
	write := func(body string) { // atomic, so that no tick sees a partial file
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("pools:\n  exclusive_a: {cpus: \"2-3\"}\n")
	topo, err := topology.Synthetic("sockets=1,cores=4")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pools: file, NodeName: "n1"}
	layout, err := resolvePools(nil, cfg, topo)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeReloader{offered: make(chan string, 16)}
	logs := make(logLines, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		watchPools(ctx, cfg, plan.NewNode(topo, layout, plan.Policy{}), []reloader{fake}, time.Millisecond, slog.New(logs))
		close(done)
	}()
	defer func() { cancel(); <-done }()

	big := "pools:\n  exclusive_a: {cpus: \"3\"}\n#" + strings.Repeat("x", 10<<20) + "\n" // a new layout, 10 MiB
	write(big)
	line := testwait.Receive(t, logs, "log of the refusal")
	want := file + ": file is " + strconv.Itoa(len(big)) + " bytes, over the limit of 1048576 bytes"
	if !strings.HasPrefix(line, "pool config changed but is unusable; keeping the current one") || !strings.Contains(line, want) {
		t.Errorf("log %q, want the refusal with %q", line, want)
	}
	if n := fake.count(); n != 0 {
		t.Fatalf("%d reload offers for a refused config, want none (%v)", n, fake.offers)
	}
	write("pools:\n  exclusive_a: {cpus: \"2\"}\n")
	if got := testwait.Receive(t, fake.offered, "reload offer"); got != "default=0-1,3 exclusive_a=2" {
		t.Errorf("offered %q, want the config written after the refused one", got)
	}
	if line := testwait.Receive(t, logs, "log of the reload"); !strings.HasPrefix(line, "pool config reloaded") {
		t.Errorf("log %q, want the reload", line)
	}
}

// TestRunRefusesNegativeReloadInterval: Config.PoolsReloadInterval below 0 is an error, not
// "never".
func TestRunRefusesNegativeReloadInterval(t *testing.T) {
	err := Run(t.Context(), Config{PoolsReloadInterval: -time.Second}, slog.New(slog.DiscardHandler))
	want := "pools reload interval -1s: negative interval: want 0 (never re-read the pool config) or a positive duration such as 10s"
	if err == nil || err.Error() != want {
		t.Errorf("Run error %v, want %s", err, want)
	}
}

// TestReloadIntervalFlag: the flag value takes 0 and positive durations and refuses
// negative ones, saying what is allowed.
func TestReloadIntervalFlag(t *testing.T) {
	var d ReloadInterval
	for in, want := range map[string]string{"0": "0s", "90s": "1m30s"} {
		if err := d.Set(in); err != nil || d.String() != want {
			t.Errorf("Set(%q): %v, value %s, want %s", in, err, &d, want)
		}
	}
	d = ReloadInterval(time.Second)
	want := "negative interval: want 0 (never re-read the pool config) or a positive duration such as 10s"
	if err := d.Set("-1s"); err == nil || err.Error() != want || d.String() != "1s" {
		t.Errorf("Set(-1s): %v, value %s; want error %s and the value kept", err, &d, want)
	}
	if err := d.Set("soon"); err == nil || !strings.Contains(err.Error(), `invalid duration "soon"`) {
		t.Errorf("Set(soon): %v", err)
	}
}
