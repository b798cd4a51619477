package kernel

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWrap(t *testing.T) {
	tests := []struct {
		name  string
		errno unix.Errno
		want  error
		msg   string
	}{
		{name: "EINVAL", errno: unix.EINVAL, want: ErrNoSchedCore,
			msg: "core scheduling CREATE pid 42 process: kernel without core scheduling (CONFIG_SCHED_CORE): invalid argument"},
		{name: "ENODEV", errno: unix.ENODEV, want: ErrNoSMT,
			msg: "core scheduling CREATE pid 42 process: no SMT: core scheduling needs sibling hyperthreads: no such device"},
		{name: "EPERM", errno: unix.EPERM, want: ErrNoPermission},
		{name: "ESRCH", errno: unix.ESRCH, want: ErrNoTask,
			msg: "core scheduling CREATE pid 42 process: no such task: no such process"},
		{name: "ENOMEM passes through", errno: unix.ENOMEM,
			msg: "core scheduling CREATE pid 42 process: cannot allocate memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wrap(cmdCreate, 42, Process, tt.errno)
			if !errors.Is(err, tt.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errno)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.want)
			}
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("message\n got %q\nwant %q", err, tt.msg)
			}
		})
	}
	if err := wrap(cmdGet, 1, Thread, nil); err != nil {
		t.Errorf("wrap(nil) = %v", err)
	}
}

func TestArgsRefusedBeforeSyscall(t *testing.T) {
	k := Prctl{}
	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{name: "create pid 0", call: func() error { return k.Create(0, Process) },
			msg: "core scheduling CREATE: pid 0: want a positive task id"},
		{name: "share from -1", call: func() error { return k.Share(-1, 5, Process) },
			msg: "core scheduling SHARE_FROM: pid -1: want a positive task id"},
		{name: "clear bad scope", call: func() error { return k.Clear(5, Scope(7)) },
			msg: "core scheduling SHARE_TO pid 5: invalid scope(7)"},
		{name: "get pid 0", call: func() error { _, err := k.Get(0); return err },
			msg: "core scheduling GET: pid 0: want a positive task id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil || err.Error() != tt.msg {
				t.Errorf("got %v, want %q", err, tt.msg)
			}
		})
	}
}

// expectation is what this kernel should answer to prctl, from other evidence.
type expectation struct {
	want  error  // nil (works), ErrNoSchedCore or ErrNoSMT
	known bool   // false when the kernel configuration cannot be read (no config.gz, no kallsyms)
	why   string // the evidence
}

func hostCoreSched() expectation {
	smt := false
	if b, err := os.ReadFile("/sys/devices/system/cpu/smt/active"); err == nil {
		smt = strings.TrimSpace(string(b)) == "1"
	} else {
		lists, _ := filepath.Glob("/sys/devices/system/cpu/cpu*/topology/thread_siblings_list")
		for _, l := range lists {
			b, _ := os.ReadFile(l)
			smt = smt || strings.ContainsAny(string(b), ",-")
		}
	}
	built, known, src := false, false, ""
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if zr, err := gzip.NewReader(f); err == nil {
			cfg, err := io.ReadAll(zr)
			built, known, src = bytes.Contains(cfg, []byte("\nCONFIG_SCHED_CORE=y\n")), err == nil, "/proc/config.gz"
		}
	}
	if !known {
		if syms, err := os.ReadFile("/proc/kallsyms"); err == nil && len(syms) > 0 {
			built, known, src = bytes.Contains(syms, []byte(" sched_core_share_pid\n")), true, "/proc/kallsyms"
		}
	}
	e := expectation{known: known, why: fmt.Sprintf("SCHED_CORE=%t (from %q), SMT=%t", built, src, smt)}
	switch {
	case known && !built:
		e.want = ErrNoSchedCore
	case !smt:
		e.want = ErrNoSMT
	}
	return e
}

// TestRealSyscallErrors calls the real prctl and checks the error matches what the kernel
// configuration and SMT state predict. On a machine with core scheduling it must work.
func TestRealSyscallErrors(t *testing.T) {
	e := hostCoreSched()
	want, known, why := e.want, e.known, e.why
	t.Logf("host: %s; expect %v (config known: %t)", why, want, known)

	s := Prctl{}.Probe()
	t.Logf("probe: %v", s)
	check := func(op string, err error) {
		t.Helper()
		switch {
		case want == nil && err != nil:
			t.Errorf("%s: want success, got %v", op, err)
		case want != nil && !known && (errors.Is(err, ErrNoSchedCore) || errors.Is(err, ErrNoSMT)):
			t.Logf("%s: %v (config unknown, accepted)", op, err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("%s: got %v, want errors.Is %v", op, err, want)
		}
	}
	check("probe", s.Err)

	// A kernel without core scheduling refuses the first prctl of each call, and the error
	// names that step (Clear first reads the cookie of the thread it runs on).
	step := func(op string, err error, first string) {
		t.Helper()
		check(op, err)
		if want != nil && (err == nil || !strings.HasPrefix(err.Error(), first)) {
			t.Errorf("%s: %v, want the error of its first step, %q", op, err, first)
		}
	}
	step("probe", s.Err, "core scheduling CREATE pid ")

	c := startChild(t, "sleep", nil)
	step("create", Prctl{}.Create(c.pid, Process), fmt.Sprintf("core scheduling CREATE pid %d process: ", c.pid))
	step("share", Prctl{}.Share(c.pid, c.pid, Thread), fmt.Sprintf("core scheduling SHARE_FROM pid %d thread: ", c.pid))
	step("clear", Prctl{}.Clear(c.pid, Process), "core scheduling GET pid ")
	_, err := Prctl{}.Get(c.pid)
	step("get", err, fmt.Sprintf("core scheduling GET pid %d thread: ", c.pid))
	// Process groups are a scope the kernel takes: a child in a group of its own.
	g := startChild(t, "sleep", &syscall.SysProcAttr{Setpgid: true})
	step("create process group", Prctl{}.Create(g.pid, ProcessGroup), fmt.Sprintf("core scheduling CREATE pid %d process-group: ", g.pid))
}

// TestSupportString: what `podfence status` and the agent's log say of the probe.
func TestSupportString(t *testing.T) {
	for _, tc := range []struct {
		s    Support
		want string
	}{
		{s: Support{Readable: true, CapSysPtrace: true}, want: "core scheduling available (cookies readable: true, CAP_SYS_PTRACE: true)"},
		{s: Support{}, want: "core scheduling available (cookies readable: false, CAP_SYS_PTRACE: false)"},
		{s: Support{Err: ErrNoSMT, Readable: true}, want: "core scheduling unavailable: no SMT: core scheduling needs sibling hyperthreads"},
	} {
		if got := tc.s.String(); got != tc.want || tc.s.Available() != (tc.s.Err == nil) {
			t.Errorf("%+v: %q, available %v; want %q", tc.s, got, tc.s.Available(), tc.want)
		}
	}
}

// TestProbeCapSysPtrace: the probe's CAP_SYS_PTRACE is the effective set's bit, as
// /proc/self/status shows it (CapEff).
func TestProbeCapSysPtrace(t *testing.T) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	var eff uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			if eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := eff&(1<<unix.CAP_SYS_PTRACE) != 0
	if got := (Prctl{}).Probe().CapSysPtrace; got != want {
		t.Errorf("CapSysPtrace %v, CapEff %#x says %v", got, eff, want)
	}
	for _, c := range []int{unix.CAP_CHOWN, unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN, unix.CAP_SYSLOG, unix.CAP_CHECKPOINT_RESTORE} {
		if got := hasCap(c); got != (eff&(1<<c) != 0) {
			t.Errorf("capability %d: %v, CapEff %#x", c, got, eff)
		}
	}
}

// TestThrowawayThreadEnds: the thread that ran the work is gone when the call returns, and it
// never is the main thread (which the runtime would keep).
func TestThrowawayThreadEnds(t *testing.T) {
	pid := unix.Getpid()
	for i := range 200 {
		var used int
		err := onThrowawayThread(func(tid int) error {
			used = tid
			if tid == pid {
				return errors.New("ran on the main thread")
			}
			return fmt.Errorf("work %d", i)
		})
		if want := fmt.Sprintf("work %d", i); err == nil || err.Error() != want {
			t.Fatalf("call %d: got %v, want %q", i, err, want)
		}
		if err := unix.Tgkill(pid, used, 0); !errors.Is(err, unix.ESRCH) {
			t.Fatalf("call %d: thread %d still exists (tgkill: %v)", i, used, err)
		}
	}
}

func TestScopeString(t *testing.T) {
	for s, want := range map[Scope]string{Thread: "thread", Process: "process",
		ProcessGroup: "process-group", Scope(9): "scope(9)"} {
		if got := s.String(); got != want {
			t.Errorf("Scope(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}
