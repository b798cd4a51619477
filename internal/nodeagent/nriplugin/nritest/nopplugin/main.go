// Command nopplugin runs the do-nothing NRI plugin (nritest/nop) on a runtime's NRI socket.
// Benchmarks run it as the baseline process beside the real agent binary (BenchmarkAgentRSS).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/containerd/nri/pkg/stub"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin/nritest/nop"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nopplugin <nri socket>")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := stub.New(nop.Plugin{}, stub.WithPluginName("nop"), stub.WithPluginIdx("10"), stub.WithSocketPath(os.Args[1]))
	if err == nil {
		err = s.Run(ctx)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
