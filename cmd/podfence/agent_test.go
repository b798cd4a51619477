package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cliflags"
)

func TestAgentFlagsFromEnv(t *testing.T) {
	env := map[string]string{
		"PODFENCE_NRI_SOCKET":   "/run/nri/nri.sock",
		"PODFENCE_PLUGIN_INDEX": "05",
		"PODFENCE_NODE_LABEL":   "a=1, b=2",
		"PODFENCE_LOG_LEVEL":    "debug",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := newAgentCmd()
	if err := cmd.Flags().Parse([]string{"--plugin-index", "20"}); err != nil {
		t.Fatal(err)
	}
	if err := cliflags.FromEnv(cmd.Flags(), lookup); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	if got := get("nri-socket"); got != "/run/nri/nri.sock" {
		t.Errorf("nri-socket %q from the environment", got)
	}
	if got := get("plugin-index"); got != "20" {
		t.Errorf("plugin-index %q: the flag must win over the environment", got)
	}
	if got, _ := cmd.Flags().GetStringArray("node-label"); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Errorf("node-label %q", got)
	}
	if got := get("log-level"); got != "debug" {
		t.Errorf("log-level %q", got)
	}
}

func TestAgentRefusesBadLogFlags(t *testing.T) {
	err := runAgent(t.Context(), agentFlags{log: cliflags.Log{Level: "loud", Format: "text"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `flag --log-level "loud"`) {
		t.Errorf("error %v", err)
	}
	cmd := newAgentCmd() // --log-format too (cliflags.Log)
	if err := cmd.Flags().Parse([]string{"--log-format", "xml"}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.RunE(cmd, nil); err == nil || err.Error() != `flag --log-format "xml": want text or json` {
		t.Errorf("--log-format xml: error %v", err)
	}
}

// TestAgentRefusesNegativeReloadInterval: --pools-reload-interval and its environment form
// refuse a negative duration (it once meant "never"), naming the flag, the value and what
// is allowed; 0 and the default stay valid.
func TestAgentRefusesNegativeReloadInterval(t *testing.T) {
	const want = `invalid argument "-1s" for "--pools-reload-interval" flag: negative interval: ` +
		"want 0 (never re-read the pool config) or a positive duration such as 10s"
	cmd := newAgentCmd()
	if got := cmd.Flags().Lookup("pools-reload-interval").Value.String(); got != "10s" {
		t.Errorf("default %s, want 10s", got)
	}
	if err := cmd.Flags().Parse([]string{"--pools-reload-interval", "-1s"}); err == nil || err.Error() != want {
		t.Errorf("flag: error %v\nwant %s", err, want)
	}
	env := map[string]string{"PODFENCE_POOLS_RELOAD_INTERVAL": "-1s"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := cliflags.FromEnv(newAgentCmd().Flags(),
		lookup); err == nil || err.Error() != `environment PODFENCE_POOLS_RELOAD_INTERVAL="-1s": `+want {
		t.Errorf("environment: error %v\nwant environment PODFENCE_POOLS_RELOAD_INTERVAL=\"-1s\": %s", err, want)
	}
	cmd = newAgentCmd()
	if err := cmd.Flags().Parse([]string{"--pools-reload-interval", "0"}); err != nil {
		t.Errorf("0: %v", err)
	}
	if got := cmd.Flags().Lookup("pools-reload-interval").Value.String(); got != "0s" {
		t.Errorf("after --pools-reload-interval 0: %s", got)
	}
}
