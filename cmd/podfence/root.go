package main

import "github.com/spf13/cobra"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "podfence",
		Short:         "Node-level hardware isolation for Kubernetes pods",
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
		Use:   "version",
		Short: "Print the version",
		Run:   func(cmd *cobra.Command, _ []string) { cmd.Println(version) },
	})
	return root
}
