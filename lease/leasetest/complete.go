package leasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testReleaseOfLostLease: A's lease runs out and B takes the key (and the
// same epoch) over. A's Release and Complete then leave B's lease alone:
// B still holds it on a quorum, a third client is refused naming B, and
// B can extend it. A's Complete fails with ErrNotHeld (a newer holder
// exists) and the epoch stays open for B, who completes it.
func testReleaseOfLostLease(t *testing.T, s *suite) {
	bA, bB, bC := s.open(t), s.open(t), s.open(t)
	k := s.key(t)
	const epoch = 7
	lA := mustAcquire(t, bA, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	// B holds longer, so that it stays valid without renewals (which
	// could hide a wrongful release by taking the key again).
	lB := mustAcquire(t, bB, lease.Request{Key: k, TTL: 3 * s.h.TTL, Epoch: epoch, Owner: "B"})
	if vu := lA.ValidUntil(); time.Now().Before(vu) {
		t.Fatalf("B acquired %s while A was still valid", time.Until(vu))
	}
	if lB.Fence() <= lA.Fence() {
		t.Errorf("B's fence %d is not above A's %d", lB.Fence(), lA.Fence())
	}
	stillB := func(when string) {
		t.Helper()
		if in := inspect(t, bC, k); in.Holder != "B" || in.HolderNodes < bC.Quorum() {
			t.Errorf("%s: Inspect says holder %q on %d servers, want B on at least %d", when, in.Holder, in.HolderNodes, bC.Quorum())
		}
		re, _ := refusal(t, when+": third client", func() (lease.Lease, error) {
			return tryOnce(t, bC, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch + 1, Owner: "C"})
		}, lease.ErrHeld)
		if re.Holder != "B" {
			t.Errorf("%s: third client refused naming %q, want B", when, re.Holder)
		}
	}
	errRel := lA.Release(ctx(t, s.h.TTL/2))
	stillB("after the lost lease's Release")
	errComp := lA.Complete(ctx(t, s.h.TTL/2))
	stillB("after the lost lease's Complete")
	t.Logf("lost lease: Release returned %v, Complete returned %v", errRel, errComp)
	if !errors.Is(errComp, lease.ErrNotHeld) {
		t.Errorf("Complete of a lease whose key a newer holder took returned %v, want ErrNotHeld", errComp)
	}

	in := inspect(t, bC, k)
	if in.DoneEpoch >= epoch {
		t.Errorf("the lost lease's Complete marked epoch %d done (done epoch %d) while B holds it", epoch, in.DoneEpoch)
	}
	again := func() (lease.Lease, error) {
		return tryOnce(t, bC, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "C"})
	}
	if re, _ := refusal(t, "epoch held by B", again, lease.ErrHeld); re.Holder != "B" {
		t.Errorf("epoch %d refused naming %q, want B", epoch, re.Holder)
	}
	// B still holds its lease: it can extend it (a missed quorum on a
	// loaded machine is tried again while B is valid).
	for time.Now().Before(lB.ValidUntil()) {
		err := lB.Extend(ctx(t, liveness), 0)
		if err == nil {
			break
		}
		if errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("B can no longer extend its lease: %v", err)
			break
		}
	}
	if err := lB.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("B's complete: %v", err)
	}
	if in := inspect(t, bC, k); in.DoneEpoch != epoch {
		t.Errorf("done epoch %d after B's Complete, want %d", in.DoneEpoch, epoch)
	}
}

// testCompleteAfterExpiry: A's lease runs out without renewals and the
// store frees the key, but nobody else takes it (the fence is unchanged).
// A's Complete then succeeds — the work of the epoch did finish, and no
// newer holder exists — and the epoch is done: a later Acquire of it is
// refused with ErrEpochDone, from every client. On a second key, a newer
// holder takes the expired key and releases it before A's Complete: that
// Complete fails with ErrNotHeld and the epoch stays open.
func testCompleteAfterExpiry(t *testing.T, s *suite) {
	bA, bB := s.open(t), s.open(t)
	k, kGone := s.key(t), s.key(t, "newer-came-and-went")
	const epoch = 12
	lA := mustAcquire(t, bA, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	lA2 := mustAcquire(t, bA, lease.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	waitFree(t, bB, k, lA)
	waitFree(t, bB, kGone, lA2)

	if err := lA.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("Complete after the lease ran out, with no newer holder: %v (the epoch would run again)", err)
	}
	if in := inspect(t, bB, k); in.DoneEpoch != epoch {
		t.Errorf("done epoch %d after Complete, want %d", in.DoneEpoch, epoch)
	}
	for _, b := range []lease.Backend{bA, bB} {
		re, _ := refusal(t, "acquire of the epoch completed after expiry", func() (lease.Lease, error) {
			return tryOnce(t, b, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "B"})
		}, lease.ErrEpochDone)
		if re.DoneEpoch != epoch {
			t.Errorf("refused with DoneEpoch %d, want %d", re.DoneEpoch, epoch)
		}
	}
	release(mustAcquire(t, bB, lease.Request{Key: k, TTL: s.h.TTL, Epoch: epoch + 1, Owner: "B"}))

	// A newer holder came and went: not A's key to complete any more.
	lB := mustAcquire(t, bB, lease.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "B"})
	if err := lB.Release(ctx(t, liveness)); err != nil {
		t.Fatalf("B's release: %v", err)
	}
	if err := lA2.Complete(ctx(t, s.h.TTL)); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("Complete after a newer holder took the key and released it: %v, want ErrNotHeld", err)
	}
	if in := inspect(t, bB, kGone); in.DoneEpoch >= epoch {
		t.Errorf("done epoch %d after a Complete that had a newer holder, want the epoch %d open", in.DoneEpoch, epoch)
	}
	release(mustAcquire(t, bB, lease.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "B again"}))
}

// waitFree waits past l's validity until the store itself shows key free:
// the lock expired (Redis, etcd, PostgreSQL) or was given up (ZooKeeper).
func waitFree(t *testing.T, b lease.Backend, key string, l lease.Lease) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		time.Sleep(time.Until(l.ValidUntil()) + lease.Jitter(20*time.Millisecond))
		in := inspect(t, b, key)
		if in.HolderNodes == 0 && in.TTL == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still held %s after the lease's validity: %+v", key, time.Since(l.ValidUntil()), in)
		}
	}
}
