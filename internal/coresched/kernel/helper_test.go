package kernel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// helperEnv makes the test binary act as a child process for the tests (see runHelper).
const helperEnv = "PODFENCE_KERNEL_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper is the child side. Modes:
//   - sleep: pin 3 goroutines to threads, print "ready", wait for stdin EOF.
//   - spawn: print "ready", wait for a line, start a sleep child (fork+exec), print its pid,
//     wait for stdin EOF, kill the child.
//   - get-pid1: print the error of Get(1) and exit 0 if it is ErrNoPermission.
func runHelper(mode string) int {
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "sleep":
		for range 3 {
			go func() {
				runtime.LockOSThread()
				select {}
			}()
		}
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, in)
		return 0
	case "spawn":
		fmt.Println("ready")
		if _, err := in.ReadString('\n'); err != nil {
			return 2
		}
		c, err := startHelper("sleep", nil)
		if err != nil {
			fmt.Println("error:", err)
			return 2
		}
		fmt.Println(c.cmd.Process.Pid)
		_, _ = io.Copy(io.Discard, in)
		c.stop()
		return 0
	case "get-pid1":
		_, err := Prctl{}.Get(1)
		fmt.Println(err)
		if errors.Is(err, ErrNoPermission) {
			return 0
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// child is a helper process started by a test.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

// startHelper runs this test binary as a helper in mode and waits for its "ready" line.
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
	if line, err := c.line(); err != nil || line != "ready" {
		c.stop()
		return nil, fmt.Errorf("helper %s pid %d: want ready, got %q: %v", mode, c.pid, line, err)
	}
	return c, nil
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
func startChild(t *testing.T, mode string, attr *syscall.SysProcAttr) *child {
	t.Helper()
	c, err := startHelper(mode, attr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// tasks lists the thread ids of process pid under procRoot.
func tasks(t *testing.T, procRoot string, pid int) []int {
	t.Helper()
	dir := fmt.Sprintf("%s/%d/task", procRoot, pid)
	if pid == 0 {
		dir = procRoot + "/self/task"
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list threads: %v", err)
	}
	var tids []int
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatalf("thread dir %s/%s: %v", dir, e.Name(), err)
		}
		tids = append(tids, tid)
	}
	return tids
}
