package enforce

import (
	"path/filepath"
	"testing"
)

func TestHasCapSysAdmin(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		capEff string
		want   bool
	}{
		{"000001ffffffffff", true},  // root, every capability
		{"00000000a80425fb", false}, // a container's default set
		{"00000000a82425fb", true},  // with SYS_ADMIN added
		{"0000000000081000", false}, // SYS_PTRACE and NET_ADMIN only (the agent as shipped)
	} {
		f := filepath.Join(dir, "status")
		write(t, f, "Name:\tpodfence\nCapInh:\t0000000000000000\nCapEff:\t"+tc.capEff+"\nCapBnd:\t000001ffffffffff\n")
		if got := hasCapSysAdmin(f); got != tc.want {
			t.Errorf("CapEff %s: %v, want %v", tc.capEff, got, tc.want)
		}
	}
	if hasCapSysAdmin(filepath.Join(dir, "none")) {
		t.Error("no status file: true")
	}
}
