package leasetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testEpochs: Release leaves an epoch open for another owner; once
// Complete returned, that epoch and older ones are refused with
// ErrEpochDone (DoneEpoch in the refusal, from Acquire at once and from a
// batch), and a newer epoch is granted.
func testEpochs(t *testing.T, s *suite) {
	b1, b2 := s.open(t), s.open(t)
	k := s.key(t)
	req := func(e int64, owner string) lease.Request {
		return lease.Request{Key: k, TTL: s.h.TTL, Epoch: e, Owner: owner}
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
		for _, b := range []lease.Backend{b1, b2} {
			c := ctx(t, liveness)
			re, err := refusal(t, "acquire of completed epoch", func() (lease.Lease, error) { return b.Acquire(c, req(e, "late")) }, lease.ErrEpochDone)
			if re.DoneEpoch != 100 {
				t.Errorf("epoch %d refused with DoneEpoch %d, want 100", e, re.DoneEpoch)
			}
			if c.Err() != nil {
				t.Errorf("Acquire of completed epoch %d retried until its context ended: %v", e, err)
			}
		}
		re, _ := refusal(t, "batch acquire of completed epoch", func() (lease.Lease, error) { return tryOnce(t, b1, req(e, "late batch")) }, lease.ErrEpochDone)
		if re.DoneEpoch != 100 {
			t.Errorf("batch: epoch %d refused with DoneEpoch %d, want 100", e, re.DoneEpoch)
		}
	}
	l = mustAcquire(t, b1, req(101, "next tick"))
	if err := l.Complete(ctx(t, liveness)); err != nil {
		t.Fatalf("complete 101: %v", err)
	}
	re, _ := refusal(t, "acquire of completed epoch 101", func() (lease.Lease, error) { return tryOnce(t, b2, req(101, "late")) }, lease.ErrEpochDone)
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
	lA := mustAcquire(t, bA, lease.Request{Key: k, TTL: s.h.TTL, Owner: holderOwner})
	acquired := time.Now()

	// A refusal in which a server did not answer in time (a loaded
	// machine) is not a clean observation of the holders: try again.
	var re *lease.RefusedError
	var err error
	var t0, t1 time.Time
	for deadline := time.Now().Add(liveness); ; {
		t0 = time.Now()
		var got lease.Lease
		got, err = tryOnce(t, bB, lease.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
		t1 = time.Now()
		var r *lease.RefusedError
		if errors.As(err, &r) && r.NodeErrs != nil && time.Now().Before(deadline) && t1.Before(lA.ValidUntil()) {
			continue
		}
		re = refused(t, "second holder", got, err, lease.ErrHeld)
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
		if err := lA.Extend(ctx(t, liveness), 0); err == nil || errors.Is(err, lease.ErrNotHeld) {
			break
		}
	}
	re, _ = refusal(t, "second holder's Acquire", func() (lease.Lease, error) {
		return bB.Acquire(ctx(t, s.h.TTL/4), lease.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
	}, lease.ErrHeld)
	if re.Holder != holderOwner {
		t.Errorf("Acquire's refusal names holder %q, want %q", re.Holder, holderOwner)
	}
	checkTimeLeft(t, s, "Acquire's refusal after a renewal", re.HolderTTL, lA)
	re, _ = refusal(t, "one attempt after a renewal", func() (lease.Lease, error) {
		return tryOnce(t, bB, lease.Request{Key: k, TTL: s.h.TTL, Owner: "B"})
	}, lease.ErrHeld)
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
func checkTimeLeft(t *testing.T, s *suite, what string, left time.Duration, l lease.Lease) {
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
func checkAnswered(t *testing.T, b lease.Backend, in lease.Info) {
	t.Helper()
	if in.Answered < b.Quorum() || !answersAsOne(b) && in.Answered+len(nodeErrors(in.NodeErrs)) < len(b.Servers()) {
		t.Errorf("Inspect: %d servers answered, errors %v; want at least %d and every other one named", in.Answered, in.NodeErrs, b.Quorum())
	}
}

// answersAsOne reports whether b is a store that keeps its own quorum
// (Quorum 1 over several servers: ZooKeeper) and so answers a read as one,
// through whichever server the client is connected to.
func answersAsOne(b lease.Backend) bool { return b.Quorum() == 1 && len(b.Servers()) > 1 }

// inspect reads key through b, failing t on error.
// Every server is up: one that did not answer in time (a loaded machine)
// is asked again, within liveness.
func inspect(t *testing.T, b lease.Backend, key string) lease.Info {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		in, err := b.Inspect(ctx(t, liveness), key)
		if (err != nil || in.Answered < len(b.Servers()) && !answersAsOne(b)) && time.Now().Before(deadline) {
			time.Sleep(lease.Jitter(10 * time.Millisecond))
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

	l := mustAcquire(t, b, lease.Request{Key: k, TTL: s.h.TTL, Epoch: 10, Owner: holderOwner})
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

	l2 := mustAcquire(t, other, lease.Request{Key: k, TTL: s.h.TTL, Epoch: 11, Owner: "second"})
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
func release(l lease.Lease) {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.Release(c)
}
