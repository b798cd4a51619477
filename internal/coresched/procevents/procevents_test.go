package procevents

import (
	"bufio"
	"encoding/hex"
	"os"
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
