package main

import (
	"strings"
	"testing"
)

// TestFlagsRefused: bad flag values are refused before anything connects, naming the flag,
// the value and what is allowed.
func TestFlagsRefused(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "flag --node-name: empty and NODE_NAME unset"},
		{[]string{"--node-name=n", "--epc-capacity=1.5"}, `flag --epc-capacity "1.5": want a whole number of bytes`},
		{[]string{"--node-name=n", "--epc-capacity=-1Mi"}, `flag --epc-capacity "-1Mi": want a whole number of bytes`},
		{[]string{"--node-name=n", "--reload-interval=-1s"}, "flag --reload-interval -1s: want 0"},
		{[]string{"--node-name=n", "--log-level=loud"}, `flag --log-level "loud"`},
		{[]string{"--node-name=n", "--kubeconfig=/nonexistent/kubeconfig"}, "flag --kubeconfig: "},
	} {
		cmd := newCmd()
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := cmd.RunE(cmd, nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %s", tc.args, err, tc.want)
		}
	}
}

// TestNodeNameFromEnv: NODE_NAME names the node when --node-name is not given.
func TestNodeNameFromEnv(t *testing.T) {
	t.Setenv("NODE_NAME", "n1")
	cmd := newCmd()
	if err := cmd.Flags().Parse([]string{"--kubeconfig=/nonexistent/kubeconfig"}); err != nil {
		t.Fatal(err)
	}
	// Past the node name check: the kubeconfig is the first thing that fails.
	if err := cmd.RunE(cmd, nil); err == nil || !strings.HasPrefix(err.Error(), "flag --kubeconfig: ") {
		t.Errorf("error %v, want the kubeconfig's", err)
	}
}

func TestEPCBytes(t *testing.T) {
	for in, want := range map[string]int64{"": -1, "0": 0, "64Mi": 64 << 20, "4096": 4096} {
		if got, err := epcBytes(in); err != nil || got != want {
			t.Errorf("epcBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
