package events

import (
	"testing"
	"time"
)

// TestLimiterPrune: at its key limit the limiter forgets full buckets first, and all of
// them when none is full, so it never grows past the limit.
func TestLimiterPrune(t *testing.T) {
	now := time.Unix(0, 0)
	per, global := newLimiter(1, time.Minute, 2), newLimiter(100, time.Second, 1)
	for _, k := range []string{"a", "b"} {
		if !allow(per, global, k, now) {
			t.Fatalf("%s held back", k)
		}
	}
	if allow(per, global, "a", now) {
		t.Error("a passed twice within a minute")
	}
	now = now.Add(time.Minute) // a and b full again
	if !allow(per, global, "c", now) || len(per.buckets) != 1 {
		t.Errorf("c: buckets %v, want c only", per.buckets)
	}
	if !allow(per, global, "d", now) || !allow(per, global, "e", now) || len(per.buckets) > 2 {
		t.Errorf("buckets %d, want at most 2", len(per.buckets))
	}
}
