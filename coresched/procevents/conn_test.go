package procevents

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
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
	time.Sleep(50 * time.Millisecond)
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
