package leasetest

import (
	"testing"
	"time"
)

// TestWaitFreezeCountsFromTheLastElection pins waitFreeze on a made-up
// store: one that serves, elects again, then serves for good is held to
// two TTLs from the second time it began to serve; one that never settles
// is given up at five TTLs, its last stretch unreported.
func TestWaitFreezeCountsFromTheLastElection(t *testing.T) {
	const ttl = 200 * time.Millisecond // the polls (50 ms) lag at most a TTL, even loaded
	for _, tc := range []struct {
		name      string
		up        func(since time.Duration) bool
		served    time.Duration // from the freeze's start; -1: not serving at the end
		ever      bool
		end       time.Duration
		tolerance time.Duration
	}{
		{"serves at once", func(time.Duration) bool { return true }, 0, true, 2 * ttl, ttl},
		{"elects again", func(d time.Duration) bool { return d < ttl || d >= 2*ttl }, 2 * ttl, true, 4 * ttl, ttl},
		{"never serves", func(time.Duration) bool { return false }, -1, false, 5 * ttl, ttl},
		{"never settles", func(d time.Duration) bool { return d%(3*ttl) < ttl }, -1, true, 5 * ttl, ttl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			from := time.Now()
			s := &suite{h: Harness{TTL: ttl, Serving: func() bool { return tc.up(time.Since(from)) }}}
			served, ever, end := s.waitFreeze(t, from)
			if ever != tc.ever {
				t.Errorf("served at all: %v, want %v", ever, tc.ever)
			}
			if tc.served < 0 {
				if !served.IsZero() {
					t.Errorf("served from %s, want not serving at the end", served.Sub(from))
				}
			} else if d := served.Sub(from) - tc.served; d < 0 || d > tc.tolerance {
				t.Errorf("served from %s, want %s", served.Sub(from), tc.served)
			}
			if d := end.Sub(from) - tc.end; d < 0 || d > tc.tolerance {
				t.Errorf("freeze ended at %s, want %s", end.Sub(from), tc.end)
			}
		})
	}
}
