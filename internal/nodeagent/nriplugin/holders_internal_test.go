package nriplugin

import (
	"testing"

	"github.com/podfence/podfence/internal/cpu/allocation"
)

// TestHoldersForgetReleasedContainers: once the containers of a sandbox are released (one
// replaced by a new instance in another sandbox, one removed), the index keeps nothing of
// that sandbox: an agent that runs for months does not grow with the containers it saw.
func TestHoldersForgetReleasedContainers(t *testing.T) {
	h := newHolders()
	app, side := allocation.Key{PodUID: "u", Container: "app"}, allocation.Key{PodUID: "u", Container: "side"}
	h.add(app, "c1", "sb1")
	h.add(side, "c2", "sb1")
	h.add(app, "c3", "sb2") // app restarted in a re-created sandbox
	h.remove(side)
	if got := h.inSandbox("sb1"); len(got) != 0 || len(h.bySandbox) != 1 || len(h.byID) != 1 {
		t.Errorf("after sandbox sb1's containers went: inSandbox(sb1) = %v, %d sandboxes and %d containers indexed; want none, 1, 1",
			got, len(h.bySandbox), len(h.byID))
	}
	if got := h.inSandbox("sb2"); len(got) != 1 || got[0] != app {
		t.Errorf("inSandbox(sb2) = %v, want [%v]", got, app)
	}
	h.remove(app)
	if len(h.bySandbox) != 0 || len(h.byID) != 0 || len(h.byKey) != 0 {
		t.Errorf("after every container went: %d sandboxes, %d containers, %d keys indexed; want none",
			len(h.bySandbox), len(h.byID), len(h.byKey))
	}
}
