package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestVersion: `podfence version` prints one line to standard output, nothing to standard
// error, with the version, the commit and the Go version, as $(podfence version) reads it.
func TestVersion(t *testing.T) {
	var out, errs bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	want := "podfence " + version + " (commit " + revision(buildSettings()) + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if out.String() != want || errs.Len() > 0 {
		t.Errorf("stdout %q, stderr %q; want stdout %q", out.String(), errs.String(), want)
	}
}

// TestRevision: the commit is the one set at build time, else the one Go stamped from git
// (marked -dirty when the tree had changes), else unknown.
func TestRevision(t *testing.T) {
	stamped := []debug.BuildSetting{{Key: "vcs.revision", Value: "4091f78abc"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "4091f78abc"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		set      string
		settings []debug.BuildSetting
		want     string
	}{
		{"", nil, "unknown"},
		{"", stamped, "4091f78abc"},
		{"", dirty, "4091f78abc-dirty"},
		{"0123456", dirty, "0123456"},
	} {
		old := commit
		commit = tc.set
		got := revision(tc.settings)
		commit = old
		if got != tc.want {
			t.Errorf("commit %q, settings %v: revision %q, want %q", tc.set, tc.settings, got, tc.want)
		}
	}
}

// TestHelpExamples: every command's --help shows an example of its use.
func TestHelpExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !strings.Contains(c.Example, "podfence") {
			t.Errorf("%q has no example in its --help", c.CommandPath())
		}
		var out bytes.Buffer
		c.SetOut(&out)
		if err := c.Help(); err != nil || !strings.Contains(out.String(), "Examples:\n"+c.Example) {
			t.Errorf("%q --help (err %v) lacks its example:\n%s", c.CommandPath(), err, out.String())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}
