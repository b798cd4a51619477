// Command podfence-extender is the kube-scheduler extender that places pods where SMT core
// scheduling costs least. It is its own binary so that the node agent (podfence) does not
// link client-go, which the extender's informers need: linked in, it raised the agent's
// resident memory by ~16 MB.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newExtenderCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "podfence-extender:", err)
		os.Exit(1)
	}
}
