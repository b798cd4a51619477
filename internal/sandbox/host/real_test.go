package host_test

// TestRealCgroup runs on the real kernel: this machine's cgroup v1 (as root), and cgroup v2
// in the QEMU guest of hack/qemu/run-go-test.sh ./sandbox/host '^TestReal'. It is not
// behind a build tag, so that vet and staticcheck check it everywhere.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/nodeagent/cgroups"
	"github.com/podfence/podfence/internal/testwait"
)

// helperEnv makes the test binary a stand-in: "shim" starts the hypervisor and waits for
// it; "hypervisor" runs helperThreads extra OS threads, two more per SIGUSR1, and reports
// on stdout.
const (
	helperEnv     = "PODFENCE_SANDBOX_HELPER"
	helperThreads = 4
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "shim":
		hyp := exec.Command(filepath.Join(filepath.Dir(os.Args[0]), "qemu-system-x86_64"))
		hyp.Env = append(os.Environ(), helperEnv+"=hypervisor")
		hyp.Stdout, hyp.Stderr = os.Stdout, os.Stderr
		if err := hyp.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "hypervisor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "hypervisor":
		hypervisor()
	}
	os.Exit(m.Run())
}

// hypervisor parks helperThreads goroutines on their own OS threads (vCPUs), two more per
// SIGUSR1 (hot-plugged vCPUs), saying "ready <pid>" and then "more" on stdout.
func hypervisor() {
	vcpus := func(n int) {
		started := make(chan struct{})
		for range n {
			go func() {
				runtime.LockOSThread() // never unlocked: the thread stays this goroutine's
				started <- struct{}{}
				select {}
			}()
		}
		for range n {
			<-started
		}
	}
	vcpus(helperThreads)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	fmt.Printf("ready %d\n", os.Getpid())
	for range usr1 {
		vcpus(2)
		fmt.Println("more")
	}
}

// standIns starts the shim and the hypervisor from symlinks named as Kata's (the kernel
// takes comm from the name: "containerd-shim"), and returns the hypervisor's pid, the
// shim's, and a reader of the hypervisor's reports.
func standIns(t *testing.T) (hyp, shim int, hotplug func()) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"containerd-shim-kata-v2", "qemu-system-x86_64"} {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "containerd-shim-kata-v2"))
	cmd.Env = append(os.Environ(), helperEnv+"=shim")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	line := readLine(t, out)
	if _, err := fmt.Sscanf(line, "ready %d", &hyp); err != nil {
		t.Fatalf("hypervisor said %q: %v", line, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // first: the shim would report its child's death
		_ = cmd.Wait()
		_ = syscall.Kill(hyp, syscall.SIGKILL)
		// The orphan is reaped by init; its cgroup can go only once it has.
		if !testwait.Until(time.Until(testwait.Deadline(t)), func() bool { return !alive(hyp) }) {
			t.Errorf("clean-up: the stand-in hypervisor %d still runs after SIGKILL", hyp)
		}
	})
	hotplug = func() {
		if err := syscall.Kill(hyp, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if l := readLine(t, out); l != "more" {
			t.Fatalf("hypervisor said %q, want more", l)
		}
	}
	return hyp, cmd.Process.Pid, hotplug
}

// alive reports whether pid runs (is neither gone nor a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		got <- strings.TrimSpace(l)
	}()
	return testwait.Receive(t, got, "a word from the stand-in hypervisor")
}

// realLayout returns the machine's cgroup layout, or skips: the test needs root and the
// cpuset, cpu and memory controllers (v1 here; v2 in the QEMU guest).
func realLayout(t *testing.T) cgroups.Layout {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates cgroups under /sys/fs/cgroup and moves processes (run go test as root, or make qemu)")
	}
	l, err := cgroups.Detect("/sys/fs/cgroup")
	if err != nil {
		t.Skipf("no cgroupfs at /sys/fs/cgroup: %v", err)
	}
	for _, c := range []string{"cpuset", "cpu", "memory"} {
		if !l.Has(c) {
			t.Skipf("no %s controller at /sys/fs/cgroup (cgroup %s; has %v)", c, l.Version, l.Controllers())
		}
	}
	return l
}

// threadsIn checks that every thread of pids is in cgroup path in each hierarchy, from
// /proc/<tid>/cgroup, and returns how many there are.
func threadsIn(t *testing.T, l cgroups.Layout, path string, pids ...int) int {
	t.Helper()
	n := 0
	for _, pid := range pids {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n++
			b, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				f := strings.SplitN(line, ":", 3)
				ctrls := strings.Split(f[1], ",")
				relevant := (l.Version == cgroups.V2 && f[0] == "0") ||
					slices.ContainsFunc([]string{"cpuset", "cpu", "memory", "pids"}, func(c string) bool { return slices.Contains(ctrls, c) })
				if relevant && f[2] != path {
					t.Errorf("thread %s of process %d: %q, want %s", e.Name(), pid, line, path)
				}
			}
		}
	}
	return n
}
