package backendtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// testEpochs: Release leaves an epoch open for another owner; once
// Complete returned, that epoch and older ones are refused with
// ErrEpochDone (DoneEpoch in the refusal, from Acquire at once and from a
// batch), and a newer epoch is granted.
func testEpochs(t *testing.T, s *suite) {
	b1, b2 := s.open(t), s.open(t)
	k := s.key(t)
	req := func(e int64, owner string) backend.Request {
		return backend.Request{Key: k, TTL: s.h.TTL, Epoch: e, Owner: owner}
	}
	l := mustAcquire(t, b1, req(100, "first try of 100"))
	if l.Epoch() != 100 || l.Key() != k || l.Owner() != "first try of 100" {
		t.Errorf("lease says key %q epoch %d owner %q, want %q 100 %q", l.Key(), l.Epoch(), l.Owner(), k, "first try of 100")
	}
	if err := l.Release(ctx(t, liveness)); err != nil {
		t.Fatalf("release: %v", err)
	}
	// Released, not completed: another owner takes epoch 100 over.
	l = mustAcquire(t, b2, req(100, "takeover of 100"))
	if err := l.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("complete 100: %v", err)
	}
	if !l.ValidUntil().IsZero() {
		t.Errorf("ValidUntil after Complete is %s, want zero", l.ValidUntil())
	}
	for _, e := range []int64{100, 99, 1} {
		for _, b := range []backend.Backend{b1, b2} {
			c := ctx(t, liveness)
			re, err := refusal(t, "acquire of completed epoch", func() (backend.Lease, error) { return b.Acquire(c, req(e, "late")) }, backend.ErrEpochDone)
			if re.DoneEpoch != 100 {
				t.Errorf("epoch %d refused with DoneEpoch %d, want 100", e, re.DoneEpoch)
			}
			if c.Err() != nil {
				t.Errorf("Acquire of completed epoch %d retried until its context ended: %v", e, err)
			}
		}
		re, _ := refusal(t, "batch acquire of completed epoch", func() (backend.Lease, error) { return tryOnce(t, b1, req(e, "late batch")) }, backend.ErrEpochDone)
		if re.DoneEpoch != 100 {
			t.Errorf("batch: epoch %d refused with DoneEpoch %d, want 100", e, re.DoneEpoch)
		}
	}
	l = mustAcquire(t, b1, req(101, "next tick"))
	if err := l.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("complete 101: %v", err)
	}
	re, _ := refusal(t, "acquire of completed epoch 101", func() (backend.Lease, error) { return tryOnce(t, b2, req(101, "late")) }, backend.ErrEpochDone)
	if re.DoneEpoch != 101 {
		t.Errorf("epoch 101 refused with DoneEpoch %d, want 101", re.DoneEpoch)
	}
}

// holderOwner is an Owner text as leasecron writes it, with spaces and
// '=' that a backend must keep as they are.
const holderOwner = "tick=1700000000 host=web1 pid=4242"

// testRefusalDetail: a refusal names the holder's Owner, that a quorum
// holds it, and a HolderTTL between the holder's remaining validity and
// the TTL counted from the moment the holder's Acquire returned (the
// store set the key before that).
func testRefusalDetail(t *testing.T, s *suite) {
	bA, bB := s.open(t), s.open(t)
	k := s.key(t)
	lA := mustAcquire(t, bA, backend.Request{Key: k, TTL: s.h.TTL, Owner: holderOwner})
	acquired := time.Now()

	// A refusal in which a server did not answer in time (a loaded
	// machine) is not a clean observation of the holders: try again.
	var re *backend.RefusedError
	var err error
	var t0, t1 time.Time
	for deadline := time.Now().Add(liveness); ; {
		t0 = time.Now()
		var got backend.Lease
		got, err = tryOnce(t, bB, backend.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
		t1 = time.Now()
		var r *backend.RefusedError
		if errors.As(err, &r) && r.NodeErrs != nil && time.Now().Before(deadline) && t1.Before(lA.ValidUntil()) {
			continue
		}
		re = refused(t, "second holder", got, err, backend.ErrHeld)
		break
	}
	if re.Holder != holderOwner {
		t.Errorf("refusal names holder %q, want %q", re.Holder, holderOwner)
	}
	if re.HolderNodes < bB.Quorum() {
		t.Errorf("refusal says %d servers hold the lease, want at least the quorum %d: %v", re.HolderNodes, bB.Quorum(), err)
	}
	// The key as the store spells it (with a prefix, say) is fine too.
	if !strings.Contains(re.Key, k) {
		t.Errorf("refusal names key %q, want %q", re.Key, k)
	}
	if left := lA.ValidUntil().Sub(t1); left > 0 && re.HolderTTL < left-time.Millisecond {
		t.Errorf("HolderTTL %s is shorter than the holder's remaining validity %s: the store frees the key while the holder may still work", re.HolderTTL, left)
	}
	if most := s.h.TTL - t0.Sub(acquired) + time.Millisecond; re.HolderTTL > most {
		t.Errorf("HolderTTL %s: want at most %s, the TTL %s counted from the holder's acquisition", re.HolderTTL, most, s.h.TTL)
	}
	if !strings.Contains(err.Error(), holderOwner) {
		t.Errorf("refusal message %q does not name the holder", err)
	}

	// After a renewal, Acquire (which may retry until its context ends),
	// one attempt and Inspect all report a time left of at least the
	// holder's remaining validity and at most the TTL.
	for time.Now().Before(lA.ValidUntil()) {
		if err := lA.Extend(ctx(t, liveness), 0); err == nil || errors.Is(err, backend.ErrNotHeld) {
			break
		}
	}
	re, _ = refusal(t, "second holder's Acquire", func() (backend.Lease, error) {
		return bB.Acquire(ctx(t, s.h.TTL/4), backend.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
	}, backend.ErrHeld)
	if re.Holder != holderOwner {
		t.Errorf("Acquire's refusal names holder %q, want %q", re.Holder, holderOwner)
	}
	checkTimeLeft(t, s, "Acquire's refusal after a renewal", re.HolderTTL, lA)
	re, _ = refusal(t, "one attempt after a renewal", func() (backend.Lease, error) {
		return tryOnce(t, bB, backend.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
	}, backend.ErrHeld)
	checkTimeLeft(t, s, "a refused attempt after a renewal", re.HolderTTL, lA)
	checkTimeLeft(t, s, "Inspect after a renewal", inspect(t, bB, k).TTL, lA)
	if time.Now().Before(lA.ValidUntil()) {
		if err := lA.Release(ctx(t, liveness)); err != nil {
			t.Errorf("release: %v", err)
		}
	}
}

// checkTimeLeft checks a reported time until l's key is free, read just
// now: within (0, TTL], and not below l's remaining validity (a holder
// with 29 s left must not be reported free in 0 s). A refusal read after l's
// validity ended is not checked.
func checkTimeLeft(t *testing.T, s *suite, what string, left time.Duration, l backend.Lease) {
	t.Helper()
	valid := time.Until(l.ValidUntil())
	if valid <= 0 {
		return
	}
	if left <= 0 || left > s.h.TTL || left < valid-time.Millisecond {
		t.Errorf("%s: time left %s, want in [the holder's remaining validity %s, TTL %s]", what, left, valid, s.h.TTL)
	}
}

// checkAnswered checks that every server answered Inspect or is named in
// its NodeErrs, and at least a quorum answered.
func checkAnswered(t *testing.T, b backend.Backend, in backend.Info) {
	t.Helper()
	if in.Answered < b.Quorum() || !answersAsOne(b) && in.Answered+len(nodeErrors(in.NodeErrs)) < len(b.Servers()) {
		t.Errorf("Inspect: %d servers answered, errors %v; want at least %d and every other one named", in.Answered, in.NodeErrs, b.Quorum())
	}
}

// answersAsOne reports whether b is a store that keeps its own quorum
// (Quorum 1 over several servers: ZooKeeper) and so answers a read as one,
// through whichever server the client is connected to.
func answersAsOne(b backend.Backend) bool { return b.Quorum() == 1 && len(b.Servers()) > 1 }

// inspect reads key through b, failing t on error.
// Every server is up: one that did not answer in time (a loaded machine)
// is asked again, within liveness.
func inspect(t *testing.T, b backend.Backend, key string) backend.Info {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		in, err := b.Inspect(ctx(t, liveness), key)
		if (err != nil || in.Answered < len(b.Servers()) && !answersAsOne(b)) && time.Now().Before(deadline) {
			time.Sleep(backend.Jitter(10 * time.Millisecond))
			continue
		}
		if err != nil {
			t.Fatalf("inspect %s: %v", key, err)
		}
		checkAnswered(t, b, in)
		return in
	}
}

// testInspectAndNotes: Inspect shows a free key as free, then the holder,
// its TTL and fence, the done epoch after Complete; SetNote keeps the
// note with the highest version.
func testInspectAndNotes(t *testing.T, s *suite) {
	b, other := s.open(t), s.open(t)
	k := s.key(t)
	if in := inspect(t, other, k); in.Holder != "" || in.HolderNodes != 0 || in.TTL != 0 || in.DoneEpoch != 0 || in.Fence != 0 || in.NoteVersion != -1 || in.Note != "" {
		t.Errorf("Inspect of a new key: %+v, want free, no epoch, no fence, NoteVersion -1", in)
	}

	l := mustAcquire(t, b, backend.Request{Key: k, TTL: s.h.TTL, Epoch: 10, Owner: holderOwner})
	in := inspect(t, other, k)
	left := time.Until(l.ValidUntil())
	if in.Holder != holderOwner || in.HolderNodes < b.Quorum() {
		t.Errorf("Inspect while held: holder %q on %d servers, want %q on at least %d", in.Holder, in.HolderNodes, holderOwner, b.Quorum())
	}
	if in.TTL <= 0 || in.TTL > s.h.TTL || (left > 0 && in.TTL < left-time.Millisecond) {
		t.Errorf("Inspect while held: TTL %s, want in [remaining validity %s, TTL %s]", in.TTL, left, s.h.TTL)
	}
	if in.Fence < l.Fence() || in.DoneEpoch != 0 {
		t.Errorf("Inspect while held: fence %d, done epoch %d; want fence >= the lease's %d, no done epoch", in.Fence, in.DoneEpoch, l.Fence())
	}
	if err := l.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("complete: %v", err)
	}
	in = inspect(t, other, k)
	if in.DoneEpoch != 10 || in.HolderNodes >= b.Quorum() || in.TTL != 0 || in.Fence < l.Fence() {
		t.Errorf("Inspect after Complete: %+v; want done epoch 10, not held, TTL 0, fence >= %d", in, l.Fence())
	}

	l2 := mustAcquire(t, other, backend.Request{Key: k, TTL: s.h.TTL, Epoch: 11, Owner: "second"})
	if l2.Fence() <= l.Fence() {
		t.Errorf("second holder's fence %d is not above the first's %d", l2.Fence(), l.Fence())
	}
	if in = inspect(t, b, k); in.Fence < l2.Fence() || in.Holder != "second" {
		t.Errorf("Inspect of second holder: fence %d holder %q; want >= %d, %q", in.Fence, in.Holder, l2.Fence(), "second")
	}
	if err := l2.Release(ctx(t, liveness)); err != nil {
		t.Errorf("release: %v", err)
	}

	for _, n := range []struct {
		v    int64
		note string
		want string
		wv   int64
	}{
		{5, "run five", "run five", 5},
		{3, "run three (late)", "run five", 5}, // a lower version never overwrites
		{9, "run nine", "run nine", 9},
		{8, "run eight (late)", "run nine", 9},
	} {
		if err := b.SetNote(ctx(t, liveness), k, n.v, n.note); err != nil {
			t.Fatalf("SetNote(%d): %v", n.v, err)
		}
		if in := inspect(t, other, k); in.Note != n.want || in.NoteVersion != n.wv {
			t.Errorf("after SetNote(%d, %q): note %q version %d, want %q %d", n.v, n.note, in.Note, in.NoteVersion, n.want, n.wv)
		}
	}
}

// testReleaseOfLostLease: A's lease runs out and B takes the key (and the
// same epoch) over. A's Release and Complete then leave B's lease alone:
// B still holds it on a quorum, a third client is refused naming B, and
// B can extend it. A's Complete fails with ErrNotHeld (a newer holder
// exists) and the epoch stays open for B, who completes it.
func testReleaseOfLostLease(t *testing.T, s *suite) {
	bA, bB, bC := s.open(t), s.open(t), s.open(t)
	k := s.key(t)
	const epoch = 7
	lA := mustAcquire(t, bA, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	// B holds longer, so that it stays valid without renewals (which
	// could hide a wrongful release by taking the key again).
	lB := mustAcquire(t, bB, backend.Request{Key: k, TTL: 3 * s.h.TTL, Epoch: epoch, Owner: "B"})
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
		re, _ := refusal(t, when+": third client", func() (backend.Lease, error) {
			return tryOnce(t, bC, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch + 1, Owner: "C"})
		}, backend.ErrHeld)
		if re.Holder != "B" {
			t.Errorf("%s: third client refused naming %q, want B", when, re.Holder)
		}
	}
	errRel := lA.Release(ctx(t, s.h.TTL/2))
	stillB("after the lost lease's Release")
	errComp := lA.Complete(ctx(t, s.h.TTL/2))
	stillB("after the lost lease's Complete")
	t.Logf("lost lease: Release returned %v, Complete returned %v", errRel, errComp)
	if !errors.Is(errComp, backend.ErrNotHeld) {
		t.Errorf("Complete of a lease whose key a newer holder took returned %v, want ErrNotHeld", errComp)
	}

	in := inspect(t, bC, k)
	if in.DoneEpoch >= epoch {
		t.Errorf("the lost lease's Complete marked epoch %d done (done epoch %d) while B holds it", epoch, in.DoneEpoch)
	}
	again := func() (backend.Lease, error) {
		return tryOnce(t, bC, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "C"})
	}
	if re, _ := refusal(t, "epoch held by B", again, backend.ErrHeld); re.Holder != "B" {
		t.Errorf("epoch %d refused naming %q, want B", epoch, re.Holder)
	}
	// B still holds its lease: it can extend it (a missed quorum on a
	// loaded machine is tried again while B is valid).
	for time.Now().Before(lB.ValidUntil()) {
		err := lB.Extend(ctx(t, liveness), 0)
		if err == nil {
			break
		}
		if errors.Is(err, backend.ErrNotHeld) {
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
	lA := mustAcquire(t, bA, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	lA2 := mustAcquire(t, bA, backend.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "A"})
	waitFree(t, bB, k, lA)
	waitFree(t, bB, kGone, lA2)

	if err := lA.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("Complete after the lease ran out, with no newer holder: %v (the epoch would run again)", err)
	}
	if in := inspect(t, bB, k); in.DoneEpoch != epoch {
		t.Errorf("done epoch %d after Complete, want %d", in.DoneEpoch, epoch)
	}
	for _, b := range []backend.Backend{bA, bB} {
		re, _ := refusal(t, "acquire of the epoch completed after expiry", func() (backend.Lease, error) {
			return tryOnce(t, b, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch, Owner: "B"})
		}, backend.ErrEpochDone)
		if re.DoneEpoch != epoch {
			t.Errorf("refused with DoneEpoch %d, want %d", re.DoneEpoch, epoch)
		}
	}
	release(mustAcquire(t, bB, backend.Request{Key: k, TTL: s.h.TTL, Epoch: epoch + 1, Owner: "B"}))

	// A newer holder came and went: not A's key to complete any more.
	lB := mustAcquire(t, bB, backend.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "B"})
	if err := lB.Release(ctx(t, liveness)); err != nil {
		t.Fatalf("B's release: %v", err)
	}
	if err := lA2.Complete(ctx(t, s.h.TTL)); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("Complete after a newer holder took the key and released it: %v, want ErrNotHeld", err)
	}
	if in := inspect(t, bB, kGone); in.DoneEpoch >= epoch {
		t.Errorf("done epoch %d after a Complete that had a newer holder, want the epoch %d open", in.DoneEpoch, epoch)
	}
	release(mustAcquire(t, bB, backend.Request{Key: kGone, TTL: s.h.TTL, Epoch: epoch, Owner: "B again"}))
}

// waitFree waits past l's validity until the store itself shows key free:
// the lock expired (Redis, etcd, PostgreSQL) or was given up (ZooKeeper).
func waitFree(t *testing.T, b backend.Backend, key string, l backend.Lease) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		time.Sleep(time.Until(l.ValidUntil()) + backend.Jitter(20*time.Millisecond))
		in := inspect(t, b, key)
		if in.HolderNodes == 0 && in.TTL == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still held %s after the lease's validity: %+v", key, time.Since(l.ValidUntil()), in)
		}
	}
}

// testBadInputs: every bad URL or credential of the harness gives an
// error that names the culprit and never shows the secret.
func testBadInputs(t *testing.T, s *suite) {
	inputs := s.h.BadInputs(t)
	if len(inputs) == 0 {
		t.Fatal("the harness gave no bad inputs")
	}
	for _, bi := range inputs {
		t.Run(bi.Name, func(t *testing.T) {
			if bi.Err == nil {
				t.Fatalf("no error")
			}
			msg := bi.Err.Error()
			t.Logf("error: %s", msg)
			if bi.MustName == "" || !strings.Contains(msg, bi.MustName) {
				t.Errorf("error %q does not name %q", msg, bi.MustName)
			}
			if bi.Secret != "" && strings.Contains(msg, bi.Secret) {
				t.Errorf("error shows the secret: %q", msg)
			}
		})
	}
}

// release releases l, ignoring errors (the lease may have been lost to a
// fault; it then expires by its TTL).
func release(l backend.Lease) {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.Release(c)
}
