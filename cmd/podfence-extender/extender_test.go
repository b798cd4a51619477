package main

import (
	"strings"
	"testing"
)

// TestExtenderLogFlags: --log-level and --log-format (cliflags.Log), refused before anything
// else runs.
func TestExtenderLogFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--log-level=loud": `flag --log-level "loud": want debug, info, warn or error`,
		"--log-format=xml": `flag --log-format "xml": want text or json`,
	} {
		cmd := newExtenderCmd()
		if err := cmd.Flags().Parse([]string{args}); err != nil {
			t.Fatal(err)
		}
		if err := cmd.RunE(cmd, nil); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", args, err, want)
		}
	}
}

// TestExtenderListen: the default address is loopback; another one needs TLS or
// --insecure-listen, refused before anything connects.
func TestExtenderListen(t *testing.T) {
	if got := newExtenderCmd().Flags().Lookup("listen").DefValue; got != "127.0.0.1:8888" {
		t.Errorf("--listen defaults to %q, want 127.0.0.1:8888", got)
	}
	const kubeconfig = "--kubeconfig=/nonexistent/kubeconfig"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen=:8888"}, `flag --listen ":8888": want a loopback address, or HTTPS (--tls-cert and --tls-key), or ` +
			"--insecure-listen to serve plain HTTP there"},
		{[]string{"--listen=10.1.2.3:8888", "--tls-cert=c"}, "flags --tls-cert and --tls-key: give both or neither"},
		{[]string{"--listen=:8888", "--insecure-listen"}, "flag --kubeconfig: "},
		{[]string{"--listen=:8443", "--tls-cert=c", "--tls-key=k"}, "flag --kubeconfig: "},
		{[]string{}, "flag --kubeconfig: "},
	} {
		cmd := newExtenderCmd()
		if err := cmd.Flags().Parse(append(tc.args, kubeconfig)); err != nil {
			t.Fatal(err)
		}
		if err := cmd.RunE(cmd, nil); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %s", tc.args, err, tc.want)
		}
	}
}
