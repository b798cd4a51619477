package main

import (
	"github.com/podfence/podfence/internal/cliflags"
	"slices"
	"strings"
	"testing"
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

func TestAgentRefusesBadLogLevel(t *testing.T) {
	err := runAgent(t.Context(), agentFlags{logLevel: "loud"}, nil)
	if err == nil || !strings.Contains(err.Error(), `flag --log-level "loud"`) {
		t.Errorf("error %v", err)
	}
}
