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
	for _, tc := range []struct {
		name    string
		limit   epc.Limit
		node    epc.Node
		policy  epc.Policy
		unified map[string]string
		want    epc.Mode
		wantErr string
	}{
		{name: "no limit on a node without support", node: none, want: epc.None},
		{name: "no limit beside another owner's misc.max", node: v2, unified: map[string]string{"misc.max": "sgx_epc 1"}, want: epc.None},
		{name: "cgroup v2", limit: mib, node: v2, unified: map[string]string{"memory.high": "1G"}, want: epc.ViaUnified},
		{name: "cgroup v1", limit: mib, node: v1, want: epc.ViaWrite},
		{name: "best effort without support", limit: mib, node: none, policy: epc.BestEffort, want: epc.Unenforced},
		{name: "strict without support", limit: mib, node: none, policy: epc.Strict,
			wantErr: "the kernel lacks SGX EPC cgroup support: /sys/fs/cgroup/misc.capacity lists no sgx_epc; it needs a " +
				"kernel whose misc cgroup controller lists sgx_epc in misc.capacity (or the agent's EPC policy " +
				"best-effort, which runs the container without the cap)"},
		{name: "conflict", limit: mib, node: v2, unified: map[string]string{"misc.max": "sgx_epc 4096"},
			wantErr: `misc.max is already set to "sgx_epc 4096" in the container's unified cgroup resources (by the ` +
				`runtime or an NRI plugin that ran earlier), and podfence would set "sgx_epc 1048576": one owner per ` +
				`cgroup file, so remove the other setting or the epc-limit annotation`},
		{name: "conflict on cgroup v1", limit: mib, node: v1, unified: map[string]string{"misc.max": ""},
			wantErr: `misc.max is already set to ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := epc.Plan(tc.limit, tc.node, tc.policy, tc.unified)
			if tc.wantErr != "" {
				if err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr {
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

func TestPlanErrorKinds(t *testing.T) {
	_, err := epc.Plan(epc.Bytes(1), epc.Node{Reason: "x"}, epc.Strict, nil)
	if !errors.Is(err, epc.ErrUnsupported) {
		t.Errorf("unsupported: %v is not ErrUnsupported", err)
	}
	_, err = epc.Plan(epc.Bytes(1), epc.Node{Supported: true}, epc.Strict, map[string]string{"misc.max": "x"})
	var ce *epc.ConflictError
	if !errors.As(err, &ce) || ce.Value != "x" || ce.Limit != epc.Bytes(1) {
		t.Errorf("conflict: %#v", err)
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
		epc.Unenforced: "unenforced", epc.Mode(9): "Mode(9)"} {
		if m.String() != want {
			t.Errorf("%d: %q, want %q", int(m), m.String(), want)
		}
	}
}
