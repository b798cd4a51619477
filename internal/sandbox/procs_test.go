package sandbox_test

import (
	"slices"
	"testing"

	"github.com/podfence/podfence/internal/sandbox"
)

// Process tables as ps shows them, for the runtimes NRI reports a sandbox pid for.
var (
	// Kata with QEMU: the shim reports the hypervisor's pid; QEMU daemonised and was
	// adopted by the shim (a child subreaper); virtiofsd is the shim's child.
	kataQEMU = []sandbox.Proc{
		{PID: 1, PPID: 0, Comm: "systemd"},
		{PID: 900, PPID: 1, Comm: "containerd"},
		{PID: 1000, PPID: 1, Comm: "containerd-shim"},
		{PID: 1010, PPID: 1000, Comm: "virtiofsd"},
		{PID: 1011, PPID: 1010, Comm: "virtiofsd"},
		{PID: 1020, PPID: 1000, Comm: "qemu-system-x86"},
		{PID: 2000, PPID: 1, Comm: "containerd-shim"}, // another pod's
		{PID: 2020, PPID: 2000, Comm: "qemu-system-x86"},
	}
	// A runc-backed handler named kata (the e2e suite): the pid is pause's; the shim also
	// parents the containers (in their own cgroups) and runc while it works.
	runcKata = []sandbox.Proc{
		{PID: 1, PPID: 0, Comm: "init"},
		{PID: 3000, PPID: 1, Comm: "containerd-shim"},
		{PID: 3001, PPID: 3000, Comm: "sleep"}, // pause
		{PID: 3002, PPID: 3000, Comm: "sleep"}, // container
		{PID: 3003, PPID: 3002, Comm: "sh"},    // its child
		{PID: 3004, PPID: 3000, Comm: "runc"},
		{PID: 3005, PPID: 3004, Comm: "runc:[2:INIT]"},
		{PID: 3006, PPID: 3000, Comm: "env"}, // crictl exec, in the container's cgroup
	}
	// CRI-O, runc: conmon parents the pause process; each container has its own conmon.
	crioRunc = []sandbox.Proc{
		{PID: 1, PPID: 0, Comm: "systemd"},
		{PID: 4000, PPID: 1, Comm: "conmon"},
		{PID: 4001, PPID: 4000, Comm: "pause"},
		{PID: 4010, PPID: 1, Comm: "conmon"},
		{PID: 4011, PPID: 4010, Comm: "nginx"},
	}
)

// TestRoot: what Members starts from, and why it refuses the others.
func TestRoot(t *testing.T) {
	for _, tc := range []struct {
		anchor  int
		want    int
		wantErr string
	}{
		{anchor: 1020, want: 1000},
		{anchor: 2000, want: 2000},
		{anchor: 1011, wantErr: "the sandbox's process 1011 (virtiofsd) is neither a runtime shim nor a shim's child: " +
			"not moved (a pid reused after the sandbox ended?)"},
		{anchor: 4242, wantErr: "the sandbox's process 4242 is gone"},
		{anchor: 0, wantErr: "the runtime reported no pid for the sandbox"},
	} {
		got, err := sandbox.Root(kataQEMU, tc.anchor)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("Root(%d) = %+v, %v; want %s", tc.anchor, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.PID != tc.want {
			t.Errorf("Root(%d) = %+v, %v; want pid %d", tc.anchor, got, err, tc.want)
		}
	}
}

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		table  []sandbox.Proc
		anchor int
		skip   []int
		want   []int
	}{
		{name: "Kata QEMU: shim, virtiofsd and QEMU", table: kataQEMU, anchor: 1020, want: []int{1000, 1010, 1020, 1011}},
		{name: "Kata: containers report the hypervisor's pid too, never skipped", table: kataQEMU, anchor: 1020,
			skip: []int{1020}, want: []int{1000, 1010, 1020, 1011}},
		{name: "built-in VMM: the shim reports itself", table: kataQEMU, anchor: 2000, want: []int{2000, 2020}},
		{name: "runc-backed: shim and pause, not the containers nor runc", table: runcKata, anchor: 3001,
			skip: []int{3002, 3006}, want: []int{3000, 3001}},
		{name: "no shim above the anchor (a reused pid): nothing", table: kataQEMU, anchor: 1011, want: nil},
		{name: "a host daemon with the sandbox's old pid: nothing", table: kataQEMU, anchor: 900, want: nil},
		{name: "CRI-O: conmon above pause", table: crioRunc, anchor: 4001, skip: []int{4011}, want: []int{4000, 4001}},
		{name: "anchor gone", table: kataQEMU, anchor: 4242, want: nil},
		{name: "no anchor", table: kataQEMU, anchor: 0, want: nil},
		{name: "a loop in a torn snapshot ends", table: []sandbox.Proc{{PID: 5, PPID: 6, Comm: "containerd-shim"}, {PID: 6, PPID: 5, Comm: ""}},
			anchor: 5, want: []int{5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sandbox.Members(tc.table, tc.anchor, func(p sandbox.Proc) bool { return slices.Contains(tc.skip, p.PID) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("Members(anchor %d) = %v, want %v", tc.anchor, got, tc.want)
			}
		})
	}
}
