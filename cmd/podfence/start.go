package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/podfence/podfence/internal/pinning"
)

func newStartCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "start [-- COMMAND [ARG...]]",
		Short: "Start a container's processes pinned to their CPUs (the process starter)",
		Long: `start runs inside a container as its entrypoint, set up by the podfence agent. It reads
the container's processes from ` + pinning.EnvPinning + ` (the ` + pinning.Key + ` annotation's JSON) and
` + pinning.EnvContainer + `, and its CPUs from ` + pinning.EnvExclusiveCPUs + ` and ` + pinning.EnvSharedCPUs + `. It starts every
process but the last pinned to its CPUs, then execs the last one pinned to its CPUs.
COMMAND is the container's own command: it runs as the last process when that process
names no binary. start fails, naming the numbers, when the processes ask for more CPUs
than the container has.`,
		Example: `  ` + pinning.EnvContainer + `=app EXCLUSIVE_CPUS=2,3 \
  ` + pinning.EnvPinning + `='[{"container":"app","processes":[{"process":"/bin/sleep","args":["1d"],"pool":"exclusive_a","cpus":1},{"process":"","args":[],"pool":"exclusive_a","cpus":1}]}]' \
  podfence start -- /bin/app --serve`,
		RunE: func(cmd *cobra.Command, args []string) error {
			s := pinning.Starter{
				Affinity: pinning.SchedAffinity{},
				Execer:   pinning.OSExecer{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr},
				Log:      slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
			}
			return s.Start(os.Environ(), args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	return cmd
}
