package pinning

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"github.com/podfence/podfence/internal/testwait"
)

// twoCPUs returns this process's CPUs and two of them, or skips the test.
func twoCPUs(t *testing.T) (all cpuset.CPUSet, a, b int) {
	t.Helper()
	all, err := SchedAffinity{}.Get(0)
	if err != nil {
		t.Fatal(err)
	}
	if all.Size() < 2 {
		t.Skipf("needs 2 allowed CPUs to tell a pinned process from an unpinned one; this process may use %s", all)
	}
	ids := all.List()
	return all, ids[0], ids[len(ids)-1]
}

// allowedList reads Cpus_allowed_list from a /proc status file.
func allowedList(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no Cpus_allowed_list", path)
	return ""
}

// TestRealStartPinned forks a real child through the starter's path and reads its
// affinity from /proc; no thread of this process may keep the narrowed mask.
func TestRealStartPinned(t *testing.T) {
	all, _, cpu := twoCPUs(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary:", err)
	}
	ex := OSExecer{Stderr: os.Stderr}
	s := Starter{Affinity: SchedAffinity{}, Execer: ex}
	pid, err := s.startPinned(cpuset.New(cpu), Command{Path: sleep, Args: []string{"30"}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ex.Kill(pid); err != nil {
			t.Error(err)
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}()
	if got := allowedList(t, fmt.Sprintf("/proc/%d/status", pid)); got != fmt.Sprint(cpu) {
		t.Errorf("child %d: Cpus_allowed_list %s, want %d", pid, got, cpu)
	}
	// The pinned thread ends with its goroutine; the runtime reaps it soon after.
	testwait.EventuallyNil(t, "no thread of the starter with the child's mask", func() error {
		tasks, _ := filepath.Glob("/proc/self/task/*/status")
		for _, task := range tasks {
			if got, ok := taskAllowedList(task); ok && got != all.String() {
				return fmt.Errorf("%s: %s (want %s)", task, got, all)
			}
		}
		return nil
	})
}

// taskAllowedList reads Cpus_allowed_list from a thread's status file; ok is false when
// the thread is gone.
func taskAllowedList(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// TestRealStartExec runs the whole starter in a helper copy of this test binary: it forks
// one shell pinned to one CPU, then execs another pinned to another, which keeps the PID.
func TestRealStartExec(t *testing.T) {
	_, a, b := twoCPUs(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const report = `echo %s $$ $(grep Cpus_allowed_list /proc/self/status)`
	pinning := Encode(Container{Name: "app", Processes: []Process{
		{Path: "/bin/sh", Args: []string{"-c", fmt.Sprintf(report, "forked")}, Pool: "exclusive_t", CPUs: 1},
		{Path: "/bin/sh", Args: []string{"-c", fmt.Sprintf(report, "exec")}, Pool: "exclusive_t", CPUs: 1},
	}})
	cmd := exec.Command(exe, "-test.run=^$") // TestMain runs the starter
	cmd.Env = append(os.Environ(), "PINNING_HELPER=1", EnvContainer+"=app", EnvPinning+"="+pinning,
		fmt.Sprintf("%s=%d,%d", EnvExclusiveCPUs, a, b))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	// Lines are "<name> <pid> Cpus_allowed_list: <cpus>".
	got := map[string][2]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[2] == "Cpus_allowed_list:" {
			got[f[0]] = [2]string{f[1], f[3]}
		}
	}
	helper := fmt.Sprint(cmd.Process.Pid)
	if f := got["forked"]; f[1] != fmt.Sprint(a) || f[0] == helper {
		t.Errorf("forked process: pid %q on CPUs %q; want a child of %s on CPU %d\n%s", f[0], f[1], helper, a, out)
	}
	if e := got["exec"]; e != [2]string{helper, fmt.Sprint(b)} {
		t.Errorf("exec'd process: pid %q on CPUs %q; want the helper's pid %s on CPU %d\n%s", e[0], e[1], helper, b, out)
	}
}

// TestMain makes the test binary, with PINNING_HELPER=1, the helper process of
// TestRealStartExec: the whole starter, from the environment.
func TestMain(m *testing.M) {
	if os.Getenv("PINNING_HELPER") == "1" {
		s := Starter{Affinity: SchedAffinity{}, Execer: OSExecer{Stdout: os.Stdout, Stderr: os.Stderr}}
		fmt.Fprintln(os.Stderr, s.Start(os.Environ(), nil)) // Start returns only when it fails
		os.Exit(1)
	}
	os.Exit(m.Run())
}
