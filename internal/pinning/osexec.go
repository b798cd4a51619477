package pinning

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// OSExecer is the operating system's Execer. Children it starts share its standard files.
type OSExecer struct {
	Stdin, Stdout, Stderr *os.File
}

var _ Execer = OSExecer{}

// Start forks and execs c from the calling thread (os/exec clones from the current thread)
// and returns the child's PID without waiting for it: once the last process is exec'd,
// waiting is that process's business.
func (e OSExecer) Start(c Command) (int, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Env, e.Stdin, e.Stdout, e.Stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// The child stays unreaped until someone waits, so its PID cannot be reused under Kill.
	_ = cmd.Process.Release()
	return pid, nil
}

// Exec replaces the current process with c (execve(2) keeps the calling thread's affinity).
func (OSExecer) Exec(c Command) error {
	path, err := exec.LookPath(c.Path)
	if err != nil {
		return err
	}
	argv := append([]string{c.Path}, c.Args...)
	if err := syscall.Exec(path, argv, c.Env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// Kill sends SIGKILL to pid.
func (OSExecer) Kill(pid int) error {
	return syscall.Kill(pid, syscall.SIGKILL)
}
