//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// agent runs `podfence agent` on the guest containerd's NRI socket; its log goes to one
// file across restarts.
type agent struct {
	sock, pools, log string
	cmd              *exec.Cmd
	exited           chan error
}

// pools is the guest's pool config: SMT core 0 (CPUs 0 and 1) holds the default pool (CPU
// 0) and the shared pool (CPU 1), core 1 (CPUs 2 and 3) is one exclusive pool. CPU 1
// shares a core with the default pool, which the agent accepts with a warning.
const pools = `pools:
  default: {cpus: "0"}
  shared_s: {cpus: "1"}
  exclusive_a: {cpus: "2-3", hyperThreadingPolicy: multiThreaded}
`

func newAgent(nriSock string) (*agent, error) {
	a := &agent{sock: nriSock, pools: filepath.Join(work, "poolconfig-guest.yaml"), log: filepath.Join(work, "agent.log")}
	if err := os.WriteFile(a.pools, []byte(pools), 0o644); err != nil {
		return nil, err
	}
	return a, nil
}

// start starts the agent with extra flags and waits for its first synchronization with
// the runtime. It returns the log offset of this start.
func (a *agent) start(extra ...string) (int64, error) {
	off := a.offset()
	logf, err := os.OpenFile(a.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	bin := filepath.Join(binDir, "podfence")
	args := append([]string{"agent", "--nri-socket", a.sock, "--pools", a.pools, "--node-name", hostname,
		"--checkpoint-dir", filepath.Join(work, "checkpoint"), "--start-binary", bin,
		"--device-plugin-dir", "", "--metrics-address", "", "--events=false", "--publish-node-info=false",
		// A process-event watcher alone, not the periodic reconcile, gives exec'd tasks
		// their cookie within the run.
		"--coresched-reconcile-interval", "1h",
		// NRI calls are slow under TCG: the default cadences would only add load.
		"--pools-reload-interval", "0"}, extra...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.Env = []string{pathEnv}
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := a.cmd.Start(); err != nil {
		return off, fmt.Errorf("start the agent: %w", err)
	}
	a.exited = make(chan error, 1)
	go func(c *exec.Cmd, done chan<- error) { done <- c.Wait() }(a.cmd, a.exited)
	if _, err := a.waitLog(off, `msg=synchronized`, 2*time.Minute); err != nil {
		return off, fmt.Errorf("agent start: %w\n%s", err, tail(a.log, 30))
	}
	return off, nil
}

// stop sends SIGTERM and waits for the agent to exit (SIGKILL after 30 s).
func (a *agent) stop() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
	a.cmd = nil
}

// offset is the log's current size.
func (a *agent) offset() int64 {
	st, err := os.Stat(a.log)
	if err != nil {
		return 0
	}
	return st.Size()
}

// waitLog waits until a line after offset off matches pattern and returns it.
func (a *agent) waitLog(off int64, pattern string, timeout time.Duration) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	for {
		if line, ok := findLine(a.log, off, re); ok {
			return line, nil
		}
		select {
		case err := <-a.exited:
			a.exited <- err // for stop
			return "", fmt.Errorf("agent exited (%v) before logging %q", err, pattern)
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no log line matching %q within %s", pattern, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
