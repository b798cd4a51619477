package main

import (
	"strings"
	"testing"

	"github.com/podfence/podfence/internal/cliflags"
)

func TestAgentEPCFlags(t *testing.T) {
	cmd := newAgentCmd()
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	for name, want := range map[string]string{"epc-policy": "strict", "epc-apply-at": "create", "cgroup-root": "/sys/fs/cgroup",
		"metrics-address": "127.0.0.1:9464"} {
		if got := get(name); got != want {
			t.Errorf("--%s defaults to %q, want %q", name, got, want)
		}
	}
	env := map[string]string{"PODFENCE_EPC_POLICY": "best-effort", "PODFENCE_EPC_APPLY_AT": "start", "PODFENCE_METRICS_ADDRESS": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := cmd.Flags().Parse([]string{"--cgroup-root", "/host/cgroup"}); err != nil {
		t.Fatal(err)
	}
	if err := cliflags.FromEnv(cmd.Flags(), lookup); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"epc-policy": "best-effort", "epc-apply-at": "start", "cgroup-root": "/host/cgroup",
		"metrics-address": ""} {
		if got := get(name); got != want {
			t.Errorf("--%s %q, want %q", name, got, want)
		}
	}
	err := newAgentCmd().Flags().Parse([]string{"--epc-policy", "lenient"})
	if err == nil || !strings.Contains(err.Error(), `EPC policy "lenient": want strict or best-effort`) {
		t.Errorf("bad policy: %v", err)
	}
	err = newAgentCmd().Flags().Parse([]string{"--epc-apply-at", "later"})
	if err == nil || !strings.Contains(err.Error(), `EPC apply-at "later": want create or start`) {
		t.Errorf("bad apply-at: %v", err)
	}
}
