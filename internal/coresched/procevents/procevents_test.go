package procevents

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
)

// fixtures reads testdata/proc-connector.txt: name → captured datagram.
func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	if !littleEndian() {
		t.Skip("fixtures were captured on a little-endian host")
	}
	f, err := os.Open("testdata/proc-connector.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		b, err := hex.DecodeString(strings.ReplaceAll(rest, " ", ""))
		if err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		out[name] = b
	}
	return out
}

func TestParse(t *testing.T) {
	fx := fixtures(t)
	for _, tc := range []struct {
		name string
		want Event
	}{
		{name: "ack", want: Event{What: None, CPU: 1, Time: 2671740978624}},
		{name: "exit", want: Event{What: Exit, CPU: 1, Time: 2671751919187}},
		{name: "fork", want: Event{What: Fork, CPU: 1, Time: 2671752369607,
			ParentPid: 8333, ParentTgid: 8333, Pid: 8860, Tgid: 8860}},
		{name: "exec", want: Event{What: Exec, CPU: 1, Time: 2671753583816, Pid: 8860, Tgid: 8860}},
		{name: "fork-thread", want: Event{What: Fork, CPU: 1, Time: 2671770215773,
			ParentPid: 8850, ParentTgid: 8850, Pid: 8861, Tgid: 8854}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := Parse(fx[tc.name])
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 || evs[0] != tc.want {
				t.Fatalf("got %+v\nwant [%+v]", evs, tc.want)
			}
			if got, want := evs[0].Thread(), tc.name == "fork-thread"; got != want {
				t.Errorf("Thread() = %v", got)
			}
		})
	}
}

func TestParseDatagrams(t *testing.T) {
	fx := fixtures(t)
	two := append(append([]byte{}, fx["fork"]...), fx["exec"]...)
	if evs, err := Parse(two); err != nil || len(evs) != 2 || evs[1].What != Exec {
		t.Errorf("two messages: %+v, %v", evs, err)
	}
	foreign := append([]byte{}, fx["exec"]...)
	foreign[nlHdrLen] = 7 // another connector's idx
	if evs, err := Parse(foreign); err != nil || len(evs) != 0 {
		t.Errorf("foreign connector: %+v, %v", evs, err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		err  string
	}{
		{name: "cut message", b: fx["exec"][:60], err: "netlink message at byte 0: length 76, 60 bytes left"},
		{name: "cut event", b: shortExec(fx["exec"]), err: "exec event with 4 data bytes: want 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.b); err == nil || err.Error() != tc.err {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// shortExec trims an exec message so that its event data holds one u32.
func shortExec(b []byte) []byte {
	n := nlHdrLen + cnMsgLen + procHdrLen + 4
	c := append([]byte{}, b[:n]...)
	ne.PutUint32(c, uint32(n))
	ne.PutUint16(c[nlHdrLen+16:], procHdrLen+4)
	return c
}

func TestRequest(t *testing.T) {
	want := "28000000030000000700000000000000" + // nlmsghdr: len 40, NLMSG_DONE, seq 7
		"0100000001000000070000000000000004000000" + // cn_msg: proc, seq 7, len 4
		"01000000" // PROC_CN_MCAST_LISTEN
	if !littleEndian() {
		t.Skip("expected bytes are little endian")
	}
	if got := hex.EncodeToString(Request(7, Listen)); got != want {
		t.Errorf("listen request\n got %s\nwant %s", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Request(1, Listen))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, _ := Parse(b)
		if len(evs) > len(b)/(nlHdrLen+cnMsgLen+procHdrLen)+1 {
			t.Fatalf("%d events from %d bytes", len(evs), len(b))
		}
	})
}

func littleEndian() bool { return ne.Uint16([]byte{1, 0}) == 1 }

// message builds one netlink message of type typ: the connector header of the process
// connector, whose len field says cnLen (-1: the event's size), then a proc_event of kind
// what (cpu 1, time 5) with data.
func message(typ uint16, what What, data []byte, cnLen int) []byte {
	ev := make([]byte, procHdrLen, procHdrLen+len(data))
	ne.PutUint32(ev[0:], uint32(what))
	ne.PutUint32(ev[4:], 1)
	ne.PutUint64(ev[8:], 5)
	ev = append(ev, data...)
	if cnLen < 0 {
		cnLen = len(ev)
	}
	b := make([]byte, nlHdrLen+cnMsgLen, nlHdrLen+cnMsgLen+len(ev))
	ne.PutUint32(b[0:], uint32(nlHdrLen+cnMsgLen+len(ev)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint32(b[nlHdrLen:], cnIdxProc)
	ne.PutUint32(b[nlHdrLen+4:], cnValProc)
	ne.PutUint16(b[nlHdrLen+16:], uint16(cnLen))
	return append(b, ev...)
}

// header is a netlink message of type typ without a payload (16 bytes).
func header(typ uint16) []byte {
	b := make([]byte, nlHdrLen)
	ne.PutUint32(b, nlHdrLen)
	ne.PutUint16(b[4:], typ)
	return b
}

// cut shortens a one-message datagram to n bytes, its netlink length with it.
func cut(b []byte, n int) []byte {
	b = slices.Clone(b[:n])
	ne.PutUint32(b, uint32(n))
	return b
}

func u32s(vs ...uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		ne.PutUint32(b[4*i:], v)
	}
	return b
}

// TestParseBounds: messages and events of exactly the size their kind needs are read; one
// byte less is an error naming what is short; a payload-less no-op message is skipped; the
// connector's length, not the netlink one, bounds an event.
func TestParseBounds(t *testing.T) {
	const done, noop = 3, 1 // NLMSG_DONE, NLMSG_NOOP
	exec := message(done, Exec, u32s(7, 8), -1)
	exit := message(done, Exit, nil, -1)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		b    []byte
		want []Event
		err  string
	}{
		{name: "exec of exactly 8 data bytes", b: exec, want: []Event{{What: Exec, CPU: 1, Time: 5, Pid: 7, Tgid: 8}}},
		{name: "fork of exactly 16 data bytes", b: message(done, Fork, u32s(1, 2, 3, 4), -1),
			want: []Event{{What: Fork, CPU: 1, Time: 5, ParentPid: 1, ParentTgid: 2, Pid: 3, Tgid: 4}}},
		{name: "an event kind without data", b: exit, want: []Event{{What: Exit, CPU: 1, Time: 5}}},
		{name: "a no-op header between events", b: cat(exec, header(noop), exit),
			want: []Event{{What: Exec, CPU: 1, Time: 5, Pid: 7, Tgid: 8}, {What: Exit, CPU: 1, Time: 5}}},
		{name: "a header without its connector message", b: cat(exec, header(done)),
			want: []Event{{What: Exec, CPU: 1, Time: 5, Pid: 7, Tgid: 8}}, err: "connector message of 0 bytes: want at least 20"},
		{name: "a connector message without an event", b: cut(message(done, None, nil, 0), nlHdrLen+cnMsgLen),
			err: "proc_event of 0 bytes: want at least 16"},
		{name: "a connector message whose event is empty", b: message(done, Exec, u32s(7, 8), 0),
			err: "proc_event of 0 bytes: want at least 16"},
		{name: "the connector's length cuts the event", b: message(done, Exec, u32s(7, 8, 9), procHdrLen+4),
			err: "exec event with 4 data bytes: want 8"},
		{name: "a second message cut short", b: cat(exit, exec[:40]), want: []Event{{What: Exit, CPU: 1, Time: 5}},
			err: "netlink message at byte 52: length 60, 40 bytes left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := Parse(tc.b)
			if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
			if !slices.Equal(evs, tc.want) {
				t.Errorf("events %+v\nwant   %+v", evs, tc.want)
			}
		})
	}
}
