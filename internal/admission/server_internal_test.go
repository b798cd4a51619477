package admission

import (
	"testing"
	"time"
)

// TestReloadEvery: Options.ReloadInterval as Serve uses it: a positive interval as given,
// 0 or less the documented 10 s.
func TestReloadEvery(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		10 * time.Millisecond: 10 * time.Millisecond,
		time.Minute:           time.Minute,
		0:                     10 * time.Second,
		-time.Second:          10 * time.Second,
	} {
		if got := reloadEvery(in); got != want {
			t.Errorf("reloadEvery(%s) = %s, want %s", in, got, want)
		}
	}
}
