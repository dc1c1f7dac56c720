package scheduler

import (
	"testing"
	"time"
)

// TestFireOffset: each host fires a tick at its own small offset, the same
// every time it computes it, and which host fires first changes from tick
// to tick.
func TestFireOffset(t *testing.T) {
	hosts := []*Scheduler{{host: "a"}, {host: "b"}, {host: "c"}}
	first := map[string]int{}
	base := time.Unix(1_800_000_000, 0)
	for i := range 300 {
		tick := base.Add(time.Duration(i) * time.Second)
		best, bestHost := fireSpread, ""
		seen := map[time.Duration]bool{}
		for _, s := range hosts {
			d := s.fireOffset(tick)
			if d < 0 || d >= fireSpread {
				t.Fatalf("fireOffset(%s) on %s = %s, want in [0, %s)", tick, s.host, d, fireSpread)
			}
			if d != s.fireOffset(tick) {
				t.Fatalf("fireOffset not deterministic")
			}
			seen[d] = true
			if d < best {
				best, bestHost = d, s.host
			}
		}
		if len(seen) == 1 {
			t.Errorf("tick %s: all hosts fire at the same offset %s", tick, best)
		}
		first[bestHost]++
	}
	for _, s := range hosts {
		if first[s.host] < 50 {
			t.Errorf("host %s fires first in %d of 300 ticks, want about a third: %v", s.host, first[s.host], first)
		}
	}
}
