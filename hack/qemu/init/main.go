//go:build linux

// Command init is PID 1 of the QEMU guest that hack/qemu/run-go-test.sh and run-node.sh
// boot: it mounts the kernel file systems, waits for the RNG, runs /test (a Go test binary,
// or hack/qemu/node) with the arguments in /args (one per line) and PODFENCE_IN_QEMU=1, in
// the directory named in /workdir (default /), reaps orphans meanwhile, prints one
// machine-readable result line and powers the guest off.
//
//	PODFENCE-QEMU-RESULT: PASS
//	PODFENCE-QEMU-RESULT: FAIL rc=1
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const resultPrefix = "PODFENCE-QEMU-RESULT:"

func main() {
	start := time.Now()
	err := setup()
	result := "FAIL setup"
	if err == nil {
		result, err = runTest("/test", "/args")
	}
	if err != nil {
		logf("%v", err)
	}
	logf("guest run took %s", time.Since(start).Round(time.Millisecond))
	fmt.Printf("%s %s\n", resultPrefix, result)
	unix.Sync()
	// Falls through to a kernel panic (and, with panic=-1 -no-reboot, a QEMU exit) on failure.
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		logf("power off: %v", err)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("podfence-init: "+format+"\n", args...)
}

// setup mounts /dev, /proc, /sys, /sys/fs/cgroup and /tmp, points stdio at the console and
// waits until getrandom no longer blocks.
func setup() error {
	mounts := []struct{ fstype, target string }{
		{"devtmpfs", "/dev"},
		{"proc", "/proc"},
		{"sysfs", "/sys"},
		{"cgroup2", "/sys/fs/cgroup"},
		{"tmpfs", "/tmp"},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", m.target, err)
		}
		if err := unix.Mount(m.fstype, m.target, m.fstype, 0, ""); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	// The initramfs may lack /dev/console, in which case the kernel gave us no stdio.
	if fd, err := unix.Open("/dev/console", unix.O_RDWR, 0); err == nil {
		for i := range 3 {
			_ = unix.Dup3(fd, i, 0)
		}
		if fd > 2 {
			_ = unix.Close(fd)
		}
	}
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	logf("kernel %s, %d CPUs, SMT siblings %s", unix.ByteSliceToString(uts.Release[:]),
		countCPUs(), siblings())
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		logf("cgroup2 controllers: %s", strings.TrimSpace(string(b)))
	}

	// Core-scheduling cookies read as 0 until the kernel's hash key is set from the RNG.
	t := time.Now()
	buf := make([]byte, 16)
	if _, err := unix.Getrandom(buf, 0); err != nil {
		return fmt.Errorf("getrandom: %w", err)
	}
	logf("RNG ready after %s", time.Since(t).Round(time.Millisecond))
	return nil
}

// runTest runs the test binary, reaping every child (orphans reparent to PID 1) until the test
// itself exits, and returns the result word for the last line.
func runTest(bin, argsFile string) (string, error) {
	args := []string{bin}
	if b, err := os.ReadFile(argsFile); err == nil {
		for _, a := range strings.Split(string(b), "\n") {
			if a != "" {
				args = append(args, a)
			}
		}
	}
	dir := "/"
	if b, err := os.ReadFile("/workdir"); err == nil && strings.TrimSpace(string(b)) != "" {
		dir = strings.TrimSpace(string(b)) // the package's directory with its testdata, as go test's
	}
	env := []string{"PODFENCE_IN_QEMU=1", "PATH=/", "HOME=/tmp", "TMPDIR=/tmp"}
	logf("running %s in %s", strings.Join(args, " "), dir)
	p, err := os.StartProcess(bin, args, &os.ProcAttr{
		Dir: dir, Env: env, Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		return "FAIL start", fmt.Errorf("start %s: %w", bin, err)
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "FAIL wait", fmt.Errorf("wait for %s: %w", bin, err)
		}
		if pid != p.Pid {
			continue // an orphan
		}
		switch {
		case ws.Exited() && ws.ExitStatus() == 0:
			return "PASS", nil
		case ws.Exited():
			return fmt.Sprintf("FAIL rc=%d", ws.ExitStatus()), nil
		case ws.Signaled():
			return fmt.Sprintf("FAIL signal=%s", ws.Signal()), nil
		}
	}
}

func countCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}

// siblings lists each CPU's thread_siblings_list, e.g. "cpu0=0-1 cpu1=0-1 ...".
func siblings() string {
	paths, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cpu := filepath.Base(filepath.Dir(filepath.Dir(p)))
		out = append(out, cpu+"="+strings.TrimSpace(string(b)))
	}
	if len(out) == 0 {
		return "unknown"
	}
	return strings.Join(out, " ")
}
