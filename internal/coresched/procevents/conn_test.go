package procevents

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/podfence/podfence/internal/testwait"
)

// kernelAnswers subscribes a netlink socket of its own with plain syscalls, not Open, and
// reports whether the kernel acknowledges it within 2 s (CONFIG_PROC_EVENTS, CAP_NET_ADMIN in
// the initial namespaces), and whether this process may force a socket's receive buffer
// beyond rmem_max (CAP_NET_ADMIN). It is the oracle of what Open must manage here.
func kernelAnswers(t *testing.T) (answers, force bool) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		t.Logf("oracle: socket: %v", err)
		return false, false
	}
	defer unix.Close(fd)
	force = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<20) == nil
	kernel := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := errors.Join(unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.Sendto(fd, Request(1, Listen), 0, kernel)); err != nil {
		t.Logf("oracle: subscribe: %v", err)
		return false, force
	}
	defer unix.Sendto(fd, Request(1, Ignore), 0, kernel)
	buf := make([]byte, 64<<10)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // EAGAIN after the timeout, ENOBUFS
		}
		evs, _ := Parse(buf[:n])
		for _, ev := range evs {
			if ev.What == None {
				return ev.Err == 0, force
			}
		}
	}
	t.Log("oracle: no answer within 2s")
	return false, force
}

// TestConn subscribes and sees the fork and exec of a child process, wherever the kernel
// answers a subscription; its socket's buffer is forced to 4 MiB when the process may.
func TestConn(t *testing.T) {
	answers, force := kernelAnswers(t)
	if !answers {
		t.Skip("the kernel does not answer a process-event subscription here")
	}
	c, err := Open(2 * time.Second)
	if err != nil {
		t.Fatalf("Open: %v (a plain subscription works here)", err)
	}
	defer c.Close()
	if size := rcvbuf(t, c); force && size < 4<<20 {
		t.Errorf("receive buffer %d bytes, want at least 4 MiB with CAP_NET_ADMIN", size)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	seen := map[What]Event{}
	buf := make([]byte, 64<<10)
	if err := c.SetReadDeadline(testwait.Deadline(t)); err != nil { // the events are queued: a bound for a failure only
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
	if err := testwait.Receive(t, done, "Read to end after Close"); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read after Close: %v, want os.ErrClosed", err)
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

// rcvbuf is the receive buffer of c's socket as the kernel reports it.
func rcvbuf(t *testing.T, c *Conn) int {
	t.Helper()
	rc, err := c.f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var serr error
	if err := rc.Control(func(fd uintptr) { size, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil ||
		serr != nil {
		t.Fatal(err, serr)
	}
	return size
}
