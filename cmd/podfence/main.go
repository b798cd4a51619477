// Command podfence is the node-level isolation layer: one binary, several subcommands.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "podfence:", err)
		os.Exit(1)
	}
}
