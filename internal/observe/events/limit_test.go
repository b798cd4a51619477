package events

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestLimiterPrune: at its key limit the limiter forgets full limiters first, and all of
// them when none is full, so it never grows past the limit.
func TestLimiterPrune(t *testing.T) {
	now := time.Unix(0, 0)
	per, global := newLimiter(1, time.Minute, 2), rate.NewLimiter(rate.Every(time.Second), 100)
	for _, k := range []string{"a", "b"} {
		if !allow(per, global, k, now) {
			t.Fatalf("%s held back", k)
		}
	}
	if allow(per, global, "a", now) {
		t.Error("a passed twice within a minute")
	}
	now = now.Add(time.Minute) // a and b full again
	if !allow(per, global, "c", now) || len(per.keys) != 1 {
		t.Errorf("c: limiters %v, want c only", per.keys)
	}
	if !allow(per, global, "d", now) || !allow(per, global, "e", now) || len(per.keys) > 2 {
		t.Errorf("limiters %d, want at most 2", len(per.keys))
	}
}

// TestAllowTakesBothOrNeither: a key held back by the global limiter keeps its token, and
// the global one keeps its token when the key is held back.
func TestAllowTakesBothOrNeither(t *testing.T) {
	now := time.Unix(1000, 0)
	per, global := newLimiter(1, time.Minute, 10), rate.NewLimiter(rate.Every(time.Second), 1)
	if !allow(per, global, "a", now) {
		t.Fatal("a held back")
	}
	if allow(per, global, "b", now) { // global empty
		t.Fatal("b passed an empty global limiter")
	}
	if allow(per, global, "a", now.Add(time.Second)) { // a empty; global refilled, keeps it
		t.Fatal("a passed twice within a minute")
	}
	if !allow(per, global, "b", now.Add(time.Second)) { // b's token was not taken above
		t.Error("b held back: the global limiter took its token")
	}
	if got := global.TokensAt(now.Add(time.Second)); got != 0 {
		t.Errorf("global tokens %v, want 0", got)
	}
}
