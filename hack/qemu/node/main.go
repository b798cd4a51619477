//go:build linux

// Command node is the guest side of `make qemu-node` (hack/qemu/run-node.sh): the program
// that hack/qemu/init runs as /test in a QEMU guest with SMT, SCHED_CORE and cgroup v2 with
// misc. It starts containerd with NRI, runc and the podfence agent, runs pods through CRI
// with crictl, and prints one line per check of facts read back from the guest's cgroup v2
// files and /proc:
//
//	PASS <check>: <name>=<value> ...
//	FAIL <check>: <name>=<value> (want <value>); ...
//
// then "qemu-node: N passed, M failed", and exits 1 on any FAIL.
package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

func main() {
	start := time.Now()
	r := &report{out: os.Stdout}
	if err := run(context.Background(), r); err != nil {
		r.fail("run", err.Error())
	}
	fmt.Printf("qemu-node: %d passed, %d failed in %.1f s\n", r.passed, r.failed, time.Since(start).Seconds())
	if r.failed > 0 || r.passed == 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, r *report) error {
	if os.Getenv("PODFENCE_IN_QEMU") != "1" {
		return fmt.Errorf("runs only as the QEMU guest's test program: use make qemu-node")
	}
	if err := prepareGuest(); err != nil {
		return fmt.Errorf("prepare the guest: %w", err)
	}
	n := newNode()
	t := time.Now()
	if err := n.start(ctx); err != nil {
		return err
	}
	logf("containerd ready and images imported in %.1f s", time.Since(t).Seconds())
	a, err := newAgent(n.nriSock)
	if err != nil {
		return err
	}
	defer a.stop()
	s := &scenario{ctx: ctx, n: n, a: a, r: r}
	failed := func() int { return r.failed }
	before := failed()
	s.guest()
	s.pools()
	s.epc()
	s.vmSandbox()
	if failed() > before {
		fmt.Println(tail(a.log, 40))
		fmt.Println(tail(n.log, 20))
	}
	return nil
}

// logf prints progress (not a check) to the console.
func logf(format string, args ...any) {
	fmt.Printf("qemu-node: "+format+"\n", args...)
}
