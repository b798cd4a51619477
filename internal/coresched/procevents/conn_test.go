package procevents

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/podfence/podfence/internal/testwait"
)

// TestConn subscribes (root in the initial namespaces, CONFIG_PROC_EVENTS) and sees the
// fork and exec of a child process.
func TestConn(t *testing.T) {
	c, err := Open(2 * time.Second)
	if err != nil {
		t.Skipf("cannot subscribe to process events here: %v", err)
	}
	defer c.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	seen := map[What]Event{}
	buf := make([]byte, 64<<10)
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for seen[Fork].Pid == 0 || seen[Exec].Pid == 0 {
		evs, err := c.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (seen %+v)", err, seen)
		}
		for _, ev := range evs {
			if ev.Pid == pid && ev.Tgid == pid && seen[ev.What].Pid == 0 {
				seen[ev.What] = ev
			}
		}
	}
	f, x := seen[Fork], seen[Exec]
	if f.ParentTgid != os.Getpid() || x.Time < f.Time {
		t.Errorf("fork %+v, exec %+v: want this test as the parent, exec after fork", f, x)
	}
	if age := time.Duration(Now() - int64(x.Time)); age < 0 || age > time.Minute {
		t.Errorf("exec event is %s old: its clock is not CLOCK_MONOTONIC", age)
	}
	t.Logf("child %d: fork on cpu %d, exec %s later", pid, f.CPU, time.Duration(x.Time-f.Time))

	// Close ends a Read in progress.
	done := make(chan error, 1)
	_ = c.SetReadDeadline(time.Time{})
	go func() {
		for {
			if _, err := c.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	testwait.Eventually(t, "the goroutine to wait in Read", parkedInRead)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
}

// parkedInRead reports whether a goroutine of this process waits for the socket in
// Conn.Read, from a dump of every goroutine's stack.
func parkedInRead() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[IO wait")) && bytes.Contains(g, []byte("procevents.(*Conn).Read(")) {
			return true
		}
	}
	return false
}
