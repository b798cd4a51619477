package main

import "testing"

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
