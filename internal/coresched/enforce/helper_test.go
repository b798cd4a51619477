package enforce

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/coresched/kernel"
)

// helperEnv makes the test binary act as a child process for the tests (see runHelper).
const helperEnv = "PODFENCE_CORESCHED_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper is the child side. Every mode first prints "ready <cookie>", the cookie its
// first thread carries at start (as the entrypoint of a container would find it; "-"
// without core scheduling). Modes:
//   - sleep: run 3 more threads, wait for stdin EOF.
//   - exec: wait for a line, then exec this binary in mode sleep (like runc exec, after
//     the test has moved it into a container's cgroup).
//   - spawn: wait for a line, start a sleep child (fork+exec), print its pid and its
//     "ready" line, wait for stdin EOF.
func runHelper(mode string) int {
	if c, err := (kernel.Prctl{}).Get(unix.Gettid()); err != nil {
		fmt.Println("ready -") // no core scheduling here
	} else {
		fmt.Printf("ready %#x\n", uint64(c))
	}
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "sleep":
		for range 3 {
			go func() { runtime.LockOSThread(); select {} }()
		}
	case "exec":
		if _, err := in.ReadString('\n'); err != nil {
			return 2
		}
		self, _ := os.Executable()
		env := append(os.Environ(), helperEnv+"=sleep")
		err := syscall.Exec(self, []string{self, "-test.run=^$"}, env)
		fmt.Println("error:", err)
		return 2
	case "spawn":
		if _, err := in.ReadString('\n'); err != nil {
			return 2
		}
		ch, err := startHelper("sleep", nil)
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		defer ch.stop()
		fmt.Println(ch.pid, ch.ready)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// child is a helper process started by a test.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
	ready string // the cookie it reported at start
}

// startHelper runs this test binary as a helper in mode and waits for its ready line.
func startHelper(mode string, attr *syscall.SysProcAttr) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find test binary: %w", err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = attr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start helper %s: %w", mode, err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	if err := c.waitReady(); err != nil {
		c.stop()
		return nil, fmt.Errorf("helper %s pid %d: %w", mode, c.pid, err)
	}
	return c, nil
}

// waitReady reads the helper's "ready <cookie>" line.
func (c *child) waitReady() error {
	line, err := c.line()
	cookie, ok := strings.CutPrefix(line, "ready ")
	if err != nil || !ok {
		return fmt.Errorf("want ready, got %q: %v", line, err)
	}
	c.ready = cookie
	return nil
}

func (c *child) line() (string, error) {
	s, err := c.out.ReadString('\n')
	return strings.TrimSpace(s), err
}

func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// startChild starts a helper for t and stops it when t ends.
func startChild(t *testing.T, mode string) *child {
	t.Helper()
	c, err := startHelper(mode, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}
