package leasetest

import (
	"sync"
	"testing"
	"time"
)

// scriptedStore answers Harness.Serving by the number of the question
// (up(n) for the n-th, from 0) and records when each was asked and
// answered.
type scriptedStore struct {
	up func(n int) bool

	mu              sync.Mutex
	asked, answered []time.Time
}

func (s *scriptedStore) serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.asked)
	s.asked = append(s.asked, time.Now())
	up := s.up(n)
	s.answered = append(s.answered, time.Now())
	return up
}

// TestWaitFreezeCountsFromTheLastElection pins waitFreeze on scripted
// stores: a stretch begins when an answer that the store serves comes
// back and ends when the last such answer was asked for; a store that
// elects again is held to two TTLs from its second stretch; one that
// never serves or never settles is given up at five TTLs. Only lower
// bounds on times are exact (a loaded machine delays the polls), the
// upper bounds have seconds of slack.
func TestWaitFreezeCountsFromTheLastElection(t *testing.T) {
	const ttl = time.Second // the polls (100 ms apart) lag far less
	for _, tc := range []struct {
		name string
		up   func(n int) bool
		// stretches: which answers begin and end each stretch (-1: the
		// freeze's end), checked against the recorded times
		stretches [][2]int
		least     time.Duration // the freeze's end, at least (from its start)
	}{
		{"serves at once", func(int) bool { return true }, [][2]int{{0, -1}}, 2 * ttl},
		{"elects again", func(n int) bool { return n < 3 || n >= 6 }, [][2]int{{0, 2}, {6, -1}}, 2*ttl + 6*servingPoll},
		{"never serves", func(int) bool { return false }, nil, 5 * ttl},
		{"never settles", func(n int) bool { return n%8 < 4 }, nil, 5 * ttl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := &scriptedStore{up: tc.up}
			from := time.Now()
			s := &suite{h: Harness{TTL: ttl, Serving: store.serving}}
			served, end := s.waitFreeze(t, from)
			if d := end.Sub(from); d < tc.least || d > 5*ttl+2*time.Second {
				t.Errorf("the freeze ended %s after its start, want at least %s (at most 5 TTLs and slack)", d, tc.least)
			}
			if tc.name == "never settles" {
				if len(served) < 2 {
					t.Errorf("%d stretches, want one per 8 answers", len(served))
				}
				return
			}
			if len(served) != len(tc.stretches) {
				t.Fatalf("%d stretches %v, want %d", len(served), served, len(tc.stretches))
			}
			for k, want := range tc.stretches {
				st, first, last := served[k], want[0], want[1]
				if st.from.Before(store.answered[first]) || (first+1 < len(store.asked) && st.from.After(store.asked[first+1])) {
					t.Errorf("stretch %d begins %s into the freeze, want when answer %d came back", k, st.from.Sub(from), first)
				}
				if last < 0 {
					if !st.to.Equal(end) {
						t.Errorf("stretch %d ends %s into the freeze, want the freeze's end", k, st.to.Sub(from))
					}
					if end.Sub(st.from) < 2*ttl {
						t.Errorf("the freeze ended %s after the last stretch began, want two TTLs", end.Sub(st.from))
					}
				} else if st.to.Before(store.answered[last-1]) || st.to.After(store.asked[last]) {
					t.Errorf("stretch %d ends %s into the freeze, want when answer %d was asked for", k, st.to.Sub(from), last)
				}
			}
		})
	}
}
