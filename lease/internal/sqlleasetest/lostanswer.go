package sqlleasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// LostGrantAnswer: an attempt whose statement reached the server and
// granted the row, but whose answer was lost (the link drops the server's
// replies), leaves the row held under a token no lease carries. Another
// client is refused — the lost grant holds the key, as it would for one
// to two TTLs with no client taking it back: the check below then fails —
// while the client's own next attempt, once the link is back, is granted
// at once (it reuses the lost attempt's token), with a higher fence, and
// completes the epoch.
func LostGrantAnswer(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{Proxied: true}), s.Open(t, Client{})
	if err := b.Warm(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	// pgx cleans a timed-out connection up in the background (a cancel
	// request, then a drain) and Close waits for that: cut the link at
	// the end so that it finishes at once.
	t.Cleanup(s.Proxy().Cut)
	req := lease.Request{Key: "job", TTL: 30 * time.Second, Epoch: 7, Owner: "lost"}
	s.Proxy().DropReplies(true)
	if _, err := Try(t, b, req); !errors.Is(err, lease.ErrNoQuorum) {
		t.Fatalf("attempt with the replies dropped: %v, want no answer (ErrNoQuorum)", err)
	}
	s.Proxy().Heal()

	in, err := other.Inspect(Ctx(t), "job")
	if err != nil || in.Holder != "lost" {
		t.Fatalf("premise: after the lost answer the row is %+v (%v), want it held for %q", in, err, "lost")
	}
	if _, err := Try(t, other, lease.Request{Key: "job", TTL: time.Minute, Epoch: 7, Owner: "other"}); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another client while the lost grant holds the row: %v, want ErrHeld", err)
	}
	l, err := Try(t, b, req)
	if err != nil {
		t.Fatalf("the client's next attempt after its lost grant: %v, want it granted at once", err)
	}
	if l.Fence() <= in.Fence {
		t.Errorf("fence %d after the lost grant's %d", l.Fence(), in.Fence)
	}
	if err := l.Complete(Ctx(t)); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if _, err := Try(t, other, lease.Request{Key: "job", TTL: time.Minute, Epoch: 7, Owner: "other"}); !errors.Is(err, lease.ErrEpochDone) {
		t.Fatalf("after Complete: %v, want ErrEpochDone", err)
	}
}

// LostGrantOfDoneEpoch: the client's next attempt after a lost grant is
// for an epoch already completed (a tick another host ran); it is refused
// as done, and frees the row its lost grant held, so another client gets
// the key at once (refused before: the premise).
func LostGrantOfDoneEpoch(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{Proxied: true}), s.Open(t, Client{})
	t.Cleanup(s.Proxy().Cut) // see LostGrantAnswer
	done, err := b.Acquire(Ctx(t), lease.Request{Key: "job", TTL: 30 * time.Second, Epoch: 6, Owner: "done"})
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Complete(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	s.Proxy().DropReplies(true)
	if _, err := Try(t, b, lease.Request{Key: "job", TTL: 30 * time.Second, Epoch: 8, Owner: "lost"}); !errors.Is(err, lease.ErrNoQuorum) {
		t.Fatalf("attempt with the replies dropped: %v, want no answer (ErrNoQuorum)", err)
	}
	s.Proxy().Heal()
	next := lease.Request{Key: "job", TTL: 30 * time.Second, Epoch: 9, Owner: "other"}
	if _, err := Try(t, other, next); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("premise: another client while the lost grant holds the row: %v, want ErrHeld", err)
	}
	if _, err := Try(t, b, lease.Request{Key: "job", TTL: 30 * time.Second, Epoch: 5, Owner: "late"}); !errors.Is(err, lease.ErrEpochDone) {
		t.Fatalf("the client's attempt at a completed epoch: %v, want ErrEpochDone", err)
	}
	if _, err := Try(t, other, next); err != nil {
		t.Fatalf("another client after the lost grant's row was freed: %v, want it granted", err)
	}
}
