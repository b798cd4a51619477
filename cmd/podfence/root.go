package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at build time with -ldflags "-X main.version=... -X
// main.commit=..." (hack/image.sh, deploy/Dockerfile); without commit, the revision Go stamps
// from git is shown.
var (
	version = "dev"
	commit  = ""
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "podfence",
		Short: "Node-level hardware isolation for Kubernetes pods",
		Example: `  podfence plan                          # how a sample node's CPUs are split between sample pods
  podfence plan --topology host          # the same on this machine
  podfence agent --pools /etc/podfence/pools --node-name "$NODE_NAME"
  podfence version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newPlanCmd())
	root.AddCommand(newAgentCmd())
	root.AddCommand(newStartCmd())
	root.AddCommand(newWebhookCmd())
	root.AddCommand(newCoreSchedCmd())
	root.AddCommand(newStatusCmd())
	root.AddCommand(&cobra.Command{
		Use:     "version",
		Short:   "Print the version, the commit and the Go version it was built from (standard output)",
		Example: `  podfence version            # podfence v1.2.0 (commit 4091f78..., go1.26.0 linux/amd64)`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "podfence %s (commit %s, %s %s/%s)\n", version, revision(buildSettings()),
				runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	})
	return root
}

// buildSettings are the settings Go recorded in the binary (none if it recorded no build info).
func buildSettings() []debug.BuildSetting {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Settings
	}
	return nil
}

// revision is commit, else the git revision in settings (with -dirty for a modified tree),
// else "unknown".
func revision(settings []debug.BuildSetting) string {
	if commit != "" {
		return commit
	}
	rev, dirty := "unknown", ""
	for _, s := range settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "unknown" {
		return rev
	}
	return rev + dirty
}
