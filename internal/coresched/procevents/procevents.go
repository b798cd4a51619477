// Package procevents reads the kernel's process events (fork, exec, …) from the netlink
// process connector (CONFIG_PROC_EVENTS; include/uapi/linux/connector.h and cn_proc.h).
//
// The wire format, in the host's byte order: each netlink datagram holds messages of
//
//	nlmsghdr   16 bytes: len u32, type u16, flags u16, seq u32, pid u32
//	cn_msg     20 bytes: idx u32, val u32, seq u32, ack u32, len u16, flags u16
//	proc_event 16 bytes: what u32, cpu u32, timestamp_ns u64; then the event's data:
//	           fork: parent_pid, parent_tgid, child_pid, child_tgid u32
//	           exec: process_pid, process_tgid u32
//	           none: err u32 (the kernel's answer to a listen request)
package procevents

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	nlHdrLen   = 16
	cnMsgLen   = 20
	procHdrLen = 16
	cnIdxProc  = 1 // CN_IDX_PROC, also the multicast group to bind
	cnValProc  = 1 // CN_VAL_PROC
)

// Op is a multicast request: start or stop sending events to the socket.
type Op uint32

const (
	Listen Op = 1 // PROC_CN_MCAST_LISTEN
	Ignore Op = 2 // PROC_CN_MCAST_IGNORE
)

// What is a proc_event's kind.
type What uint32

const (
	None What = 0          // PROC_EVENT_NONE: the answer to a listen request
	Fork What = 1          // PROC_EVENT_FORK: a new process or thread
	Exec What = 2          // PROC_EVENT_EXEC
	Exit What = 0x80000000 // PROC_EVENT_EXIT
)

func (w What) String() string {
	switch w {
	case None:
		return "none"
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	}
	return fmt.Sprintf("event(%#x)", uint32(w))
}

// Event is the part of a proc_event podfence uses. Other kinds decode with only What, CPU
// and Time set.
type Event struct {
	What What
	CPU  uint32
	// Time is the kernel's ktime_get_ns() at the event: CLOCK_MONOTONIC nanoseconds (Now).
	Time uint64
	// Pid and Tgid name the task the event is about: the child of a fork (Pid != Tgid for a
	// new thread), the process of an exec.
	Pid, Tgid int
	// ParentPid and ParentTgid are a fork's parent.
	ParentPid, ParentTgid int
	// Err is a None event's errno: 0 when a listen request succeeded.
	Err uint32
}

// Thread reports whether a fork made a thread rather than a process.
func (e Event) Thread() bool { return e.What == Fork && e.Pid != e.Tgid }

var ne = binary.NativeEndian

// Request encodes the netlink message asking the process connector for op.
func Request(seq uint32, op Op) []byte {
	b := make([]byte, nlHdrLen+cnMsgLen+4)
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.NLMSG_DONE)
	ne.PutUint32(b[8:], seq)
	c := b[nlHdrLen:]
	ne.PutUint32(c[0:], cnIdxProc)
	ne.PutUint32(c[4:], cnValProc)
	ne.PutUint32(c[8:], seq)
	ne.PutUint16(c[16:], 4)
	ne.PutUint32(c[cnMsgLen:], uint32(op))
	return b
}

// Parse decodes the process events of one datagram. Messages of another connector are
// skipped; a truncated message is an error naming its offset.
func Parse(b []byte) ([]Event, error) {
	var evs []Event
	for off := 0; len(b)-off >= nlHdrLen; {
		n := int(ne.Uint32(b[off:]))
		typ := ne.Uint16(b[off+4:])
		if n < nlHdrLen || off+n > len(b) {
			return evs, fmt.Errorf("netlink message at byte %d: length %d, %d bytes left", off, n, len(b)-off)
		}
		msg := b[off+nlHdrLen : off+n]
		off += (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if typ == unix.NLMSG_NOOP || typ == unix.NLMSG_ERROR {
			continue
		}
		if len(msg) < cnMsgLen {
			return evs, fmt.Errorf("connector message of %d bytes: want at least %d", len(msg), cnMsgLen)
		}
		if ne.Uint32(msg[0:]) != cnIdxProc || ne.Uint32(msg[4:]) != cnValProc {
			continue
		}
		data := msg[cnMsgLen:]
		if l := int(ne.Uint16(msg[16:])); l < len(data) {
			data = data[:l]
		}
		ev, err := parseEvent(data)
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func parseEvent(d []byte) (Event, error) {
	if len(d) < procHdrLen {
		return Event{}, fmt.Errorf("proc_event of %d bytes: want at least %d", len(d), procHdrLen)
	}
	ev := Event{What: What(ne.Uint32(d[0:])), CPU: ne.Uint32(d[4:]), Time: ne.Uint64(d[8:])}
	u := d[procHdrLen:]
	need := map[What]int{None: 4, Fork: 16, Exec: 8}[ev.What]
	if len(u) < need {
		return Event{}, fmt.Errorf("%s event with %d data bytes: want %d", ev.What, len(u), need)
	}
	u32 := func(i int) int { return int(ne.Uint32(u[4*i:])) }
	switch ev.What {
	case None:
		ev.Err = ne.Uint32(u)
	case Fork:
		ev.ParentPid, ev.ParentTgid, ev.Pid, ev.Tgid = u32(0), u32(1), u32(2), u32(3)
	case Exec:
		ev.Pid, ev.Tgid = u32(0), u32(1)
	}
	return ev, nil
}
