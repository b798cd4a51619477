package nodeagent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/podfence/podfence/internal/nodeagent/nriplugin"
)

// TestRefusalReasonDRAClaim: a refusal for a DRA claim is counted and reported as DRAClaim,
// however wrapped.
func TestRefusalReasonDRAClaim(t *testing.T) {
	err := fmt.Errorf("pod ns/p container %q: %w", "app", &nriplugin.ClaimError{UID: "c1", Err: errors.New("no grant")})
	if got := refusalReason(err); got != "DRAClaim" {
		t.Errorf("refusalReason(%v) = %s, want DRAClaim", err, got)
	}
}
