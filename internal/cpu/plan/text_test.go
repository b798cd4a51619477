package plan

import "testing"

// TestPercent: rounded down, and 0 of nothing rather than a division by zero (the plan
// and the node report both print it).
func TestPercent(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{{0, 0, 0}, {5, 0, 0}, {1, 3, 33}, {2, 3, 66}, {3, 3, 100}, {1500, 2000, 75}} {
		if got := Percent(tc.a, tc.b); got != tc.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
