package epc_test

import (
	"errors"
	"testing"

	"github.com/podfence/podfence/internal/epc"
)

func TestPlan(t *testing.T) {
	v2 := epc.Node{Supported: true, Unified: true}
	v1 := epc.Node{Supported: true}
	none := epc.Node{Reason: "/sys/fs/cgroup/misc.capacity lists no sgx_epc"}
	mib := epc.Bytes(1 << 20)
	other := map[string]string{"misc.max": "sgx_epc 4096"}
	for _, tc := range []struct {
		name    string
		limit   epc.Limit
		node    epc.Node
		policy  epc.Policy
		at      epc.ApplyAt
		unified map[string]string
		want    epc.Mode
		wantErr string
	}{
		{name: "no limit on a node without support", node: none, want: epc.None},
		{name: "no limit beside another owner's misc.max", node: v2, unified: other, want: epc.None},
		{name: "cgroup v2", limit: mib, node: v2, unified: map[string]string{"memory.high": "1G"}, want: epc.ViaUnified},
		{name: "cgroup v2 at start", limit: mib, node: v2, at: epc.AtStart, want: epc.ViaStart},
		{name: "cgroup v1", limit: mib, node: v1, want: epc.ViaWrite},
		{name: "cgroup v1 at start: written ahead all the same", limit: mib, node: v1, at: epc.AtStart, want: epc.ViaWrite},
		{name: "best effort without support", limit: mib, node: none, policy: epc.BestEffort, want: epc.Unenforced},
		{name: "strict without support", limit: mib, node: none, policy: epc.Strict,
			wantErr: "the kernel lacks SGX EPC cgroup support: /sys/fs/cgroup/misc.capacity lists no sgx_epc; it needs a " +
				"kernel whose misc cgroup controller lists sgx_epc in misc.capacity (or the agent's EPC policy " +
				"best-effort, which runs the container without the cap)"},
		{name: "an earlier plugin set misc.max: stand aside", limit: mib, node: v2, unified: other, want: epc.Yielded},
		{name: "stand aside at start too", limit: mib, node: v2, at: epc.AtStart, unified: other, want: epc.Yielded},
		{name: "stand aside on cgroup v1", limit: mib, node: v1, unified: map[string]string{"misc.max": ""}, want: epc.Yielded},
		{name: "stand aside without support, strict: the owner's setting fails alone", limit: mib, node: none, unified: other,
			want: epc.Yielded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := epc.Plan(tc.limit, tc.node, tc.policy, tc.at, tc.unified)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, epc.ErrUnsupported) {
					t.Fatalf("Plan = %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Plan = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestApplyAt(t *testing.T) {
	var a epc.ApplyAt
	if a != epc.AtCreate || a.String() != "create" {
		t.Errorf("zero: %v", a)
	}
	if err := a.Set("start"); err != nil || a != epc.AtStart || a.String() != "start" {
		t.Errorf("Set start: %v, %v", a, err)
	}
	if err := a.Set("later"); err == nil || err.Error() != `EPC apply-at "later": want create or start` || a != epc.AtStart {
		t.Errorf("Set later: %v, now %v", err, a)
	}
	if err := a.Set("create"); err != nil || a != epc.AtCreate || a.Type() != "create|start" {
		t.Errorf("Set create: %v, %v", a, err)
	}
}

func TestPolicy(t *testing.T) {
	var p epc.Policy
	if p != epc.Strict || p.String() != "strict" {
		t.Errorf("zero policy %v, want strict", p)
	}
	if err := p.Set("best-effort"); err != nil || p != epc.BestEffort || p.String() != "best-effort" {
		t.Errorf("Set best-effort: %v, %v", p, err)
	}
	if err := p.Set("lenient"); err == nil || err.Error() != `EPC policy "lenient": want strict or best-effort` || p != epc.BestEffort {
		t.Errorf("Set lenient: %v, policy now %v", err, p)
	}
	if p.Type() != "policy" {
		t.Errorf("Type %q", p.Type())
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[epc.Mode]string{epc.None: "none", epc.ViaUnified: "unified", epc.ViaWrite: "write",
		epc.Unenforced: "unenforced", epc.ViaStart: "start", epc.Yielded: "yielded", epc.Mode(9): "Mode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", int(m), m.String(), want)
		}
	}
}
