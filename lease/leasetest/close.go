package leasetest

import (
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testCloseAfterLapse: a lease left to run out (neither released nor
// renewed, as the daemon leaves the lease of a job it could not confirm
// dead), then its client Closed. On a backend whose Close keeps leases,
// another client trying the key all along does not get it before the
// lease's ValidUntil. A backend whose Close frees them
// (Harness.CloseFreesLeases) must show it: the key is taken before that
// instant — which is why the daemon waits for the validity of every lapsed
// lease before closing its backend.
func testCloseAfterLapse(t *testing.T, s *suite) {
	bA, bB := s.open(t), s.open(t)
	k := s.key(t)
	lA := mustAcquire(t, bA, lease.Request{Key: k, TTL: s.h.TTL, Owner: "A"})
	vu := lA.ValidUntil()
	if err := bA.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	var grantedAt time.Time
	for deadline := vu.Add(liveness); ; {
		l, err := tryOnce(t, bB, lease.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
		if err == nil {
			// The grant happened before this instant: an acquisition
			// before the validity's end is certain when it is earlier.
			grantedAt = time.Now()
			release(l)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B never acquired the key after A's client closed: %v", err)
		}
		time.Sleep(lease.Jitter(10 * time.Millisecond))
	}
	early := vu.Sub(grantedAt)
	switch {
	case !s.h.CloseFreesLeases && early > 0:
		t.Errorf("B acquired the key %s before the validity of A's lapsed lease ended: Close freed it", early.Round(time.Millisecond))
	case s.h.CloseFreesLeases && early <= 0:
		t.Errorf("the harness says Close frees leases, but B acquired the key only %s after A's validity", (-early).Round(time.Millisecond))
	default:
		t.Logf("B acquired the key at A's validity end %+v (Close frees leases: %v)", (-early).Round(time.Millisecond), s.h.CloseFreesLeases)
	}
}
