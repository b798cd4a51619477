package procevents

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLost: the socket's buffer overran and events were dropped (ENOBUFS). Reading goes on.
var ErrLost = errors.New("process events lost: socket buffer overrun")

// Conn is a netlink socket subscribed to the process events. Subscribing needs
// CAP_NET_ADMIN in the initial user and network namespaces and a caller in the initial PID
// namespace; the kernel silently ignores other callers.
type Conn struct {
	f *os.File // non-blocking: reads wait in the runtime's poller, and Close ends them
}

// Open subscribes and waits up to wait for the kernel's answer.
func Open(wait time.Duration) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("netlink connector socket: %w", err)
	}
	// A large buffer rides out fork storms; FORCE passes rmem_max with CAP_NET_ADMIN.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("bind to the process events group: %w", err)
	}
	c := &Conn{f: os.NewFile(uintptr(fd), "netlink-proc-connector")}
	if err := c.send(Listen); err != nil {
		c.f.Close()
		return nil, err
	}
	if err := c.waitAck(wait); err != nil {
		c.f.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) send(op Op) error {
	rc, err := c.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), Request(1, op), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err = errors.Join(err, serr); err != nil {
		return fmt.Errorf("send process events request %d: %w", op, err)
	}
	return nil
}

// waitAck reads until the kernel's answer to the listen request; events before it are
// dropped.
func (c *Conn) waitAck(d time.Duration) error {
	_ = c.f.SetReadDeadline(time.Now().Add(d))
	defer c.f.SetReadDeadline(time.Time{})
	buf := make([]byte, 4096)
	for {
		evs, err := c.Read(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("no answer to the process events request within %s "+
				"(the kernel ignores it outside the initial user and PID namespaces)", d)
		case errors.Is(err, ErrLost):
			continue
		case err != nil:
			return err
		}
		for _, ev := range evs {
			if ev.What != None {
				continue
			}
			if ev.Err != 0 {
				return fmt.Errorf("subscribe to process events: %w", unix.Errno(ev.Err))
			}
			return nil
		}
	}
}

// Read waits for the next datagram (into buf) and returns its events. It returns an error
// wrapping ErrLost when events were dropped, os.ErrDeadlineExceeded after a deadline, and
// os.ErrClosed once Close was called.
func (c *Conn) Read(buf []byte) ([]Event, error) {
	rc, err := c.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, err
	case err != nil: // the poller's "use of closed file"
		return nil, fmt.Errorf("read process events: %w", os.ErrClosed)
	case errors.Is(rerr, unix.ENOBUFS):
		return nil, fmt.Errorf("%w: %w", ErrLost, rerr)
	case rerr != nil:
		return nil, fmt.Errorf("read process events: %w", rerr)
	}
	return Parse(buf[:n])
}

// SetReadDeadline bounds the wait of Read.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.f.SetReadDeadline(t) }

// Close unsubscribes and closes the socket, ending a Read in progress.
func (c *Conn) Close() error {
	_ = c.send(Ignore)
	return c.f.Close()
}

// Now is CLOCK_MONOTONIC in nanoseconds, the clock of Event.Time.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
