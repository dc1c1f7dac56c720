package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// The lost answer test: the lost grant's TTL, and the bound within which
// its client must take it back — well inside the TTL, with room for a
// client to notice its connections broke and open new ones on a loaded
// machine (a Redlock node's lane waits up to 10 s for the lost round's
// answer before its cleanup goes out).
const (
	lostAnswerTTL   = 2 * time.Minute
	lostAnswerBound = 25 * time.Second
)

// testLostAnswer: a client's attempt reaches the servers but their answers
// are lost (the link drops what the servers send). The servers may have
// granted the key to the attempt's token, which no lease carries: if
// another client is refused right after, the lost grant holds the key,
// and it would for its whole TTL if nobody took it back. The client must
// take it back: its own next attempts get the key within lostAnswerBound.
func testLostAnswer(t *testing.T, s *suite) {
	b, dropReplies := s.h.OpenLossy(t)
	s.warm(b)
	other := s.open(t)
	key := s.key(t)
	req := lease.Request{Key: key, TTL: lostAnswerTTL, Epoch: 5, Owner: "lost"}

	dropReplies(true)
	l, err := tryOnce(t, b, req)
	dropReplies(false)
	if err == nil {
		_ = l.Release(ctx(t, 10*time.Second))
		t.Fatalf("an attempt whose answers were dropped was granted")
	}
	ol, oerr := tryOnce(t, other, lease.Request{Key: key, TTL: lostAnswerTTL, Epoch: 5, Owner: "other"})
	switch {
	case oerr == nil:
		t.Logf("the lost attempt left no grant: another client took the key")
		if err := ol.Release(ctx(t, liveness)); err != nil {
			t.Fatal(err)
		}
	case errors.Is(oerr, lease.ErrHeld):
		t.Logf("the lost grant holds the key: %v", oerr)
	default:
		t.Logf("the lost attempt left no grant (%v)", oerr)
	}

	start := time.Now()
	l, err = acquire(ctx(t, lostAnswerBound), b, req)
	if err != nil {
		t.Fatalf("the client did not take the key back within %s of its lost attempt (the lost grant's TTL is %s): %v", lostAnswerBound, lostAnswerTTL, err)
	}
	t.Logf("taken back after %s", time.Since(start).Round(time.Millisecond))
	_, err = tryOnce(t, other, lease.Request{Key: key, TTL: lostAnswerTTL, Epoch: 5, Owner: "other"})
	refused(t, "another client while the key is taken back", nil, err, lease.ErrHeld)
	if err := l.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}
