package leasetest

import (
	"testing"
	"time"
)

// TestOverlaps pins the exclusion checker on made-up tenures: touching
// intervals are fine, any instant with two holders is reported, including
// one hidden behind a long earlier tenure.
func TestOverlaps(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	iv := func(owner string, from, to int) interval { return interval{owner: owner, start: at(from), end: at(to)} }
	for _, tc := range []struct {
		name string
		ivs  []interval
		want int
	}{
		{"none", nil, 0},
		{"disjoint", []interval{iv("a", 0, 10), iv("b", 20, 30)}, 0},
		{"touching", []interval{iv("a", 0, 10), iv("b", 10, 20), iv("c", 20, 30)}, 0},
		{"overlap", []interval{iv("a", 0, 10), iv("b", 9, 20)}, 1},
		{"same start", []interval{iv("a", 5, 10), iv("b", 5, 10)}, 1},
		{"behind a long tenure", []interval{iv("a", 0, 100), iv("b", 10, 20), iv("c", 30, 40)}, 2},
	} {
		if got := overlaps(tc.ivs); len(got) != tc.want {
			t.Errorf("%s: %d overlaps %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}
