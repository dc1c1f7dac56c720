package sqlleasetest

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// stepTTL is the TTL of the clock step tests (long enough that the
// negative control's early takeover cannot be missed on a loaded
// machine); the server's clock jumps by serverStep, far more than a TTL.
const (
	stepTTL    = 6 * time.Second
	serverStep = time.Minute
)

// stepServerClock opens two clients as c says on one server whose clock,
// as every lease statement of both sees it, can be stepped
// (Client.ClockStep), and returns them with the step.
func stepServerClock(t *testing.T, h Harness, c Client) (a, b lease.Backend, step *atomic.Int64) {
	s := h.Start(t)
	c.ClockStep = new(atomic.Int64)
	return s.Open(t, c), s.Open(t, c), c.ClockStep
}

// abandonedThenStep: A takes the key and stops renewing (a holder that
// was killed); B has seen it held; the server's clock steps forward by
// more than the TTL; B then acquires until granted. It returns when B's
// grant came back and A's validity end.
func abandonedThenStep(t *testing.T, h Harness, c Client) (grantedAt, validUntil time.Time) {
	a, b, step := stepServerClock(t, h, c)
	lA, err := a.Acquire(Ctx(t), lease.Request{Key: "job", TTL: stepTTL, Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Try(t, b, lease.Request{Key: "job", TTL: stepTTL, Owner: "B"}); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("B before the step: %v, want ErrHeld", err)
	}
	step.Store(serverStep.Microseconds())
	if in, err := b.Inspect(Ctx(t), "job"); err != nil || in.Holder != "" {
		t.Fatalf("after the step the server's clock must show A's row expired: %+v, %v", in, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*stepTTL+30*time.Second)
	defer cancel()
	lB, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: stepTTL, Owner: "B"})
	grantedAt = time.Now()
	if err != nil {
		t.Fatalf("B never took over the abandoned lease: %v", err)
	}
	if lB.Fence() <= lA.Fence() {
		t.Fatalf("FENCE WENT BACK: %d after %d", lB.Fence(), lA.Fence())
	}
	return grantedAt, lA.ValidUntil()
}

// ServerClockStepForward: a holder stops renewing, then the server's
// clock steps a minute forward (a failover to a standby whose clock is
// ahead, an NTP step): the row's expires_at has passed on the server's
// clock, yet another client takes the key over only once the holder's
// validity has ended, and then does take it.
func ServerClockStepForward(t *testing.T, h Harness) {
	t.Parallel()
	at, vu := abandonedThenStep(t, h, Client{})
	if at.Before(vu) {
		t.Fatalf("MUTUAL EXCLUSION VIOLATED: taken over %s before the holder's validity ended", vu.Sub(at))
	}
	t.Logf("taken over %s after the holder's validity ended", at.Sub(vu).Round(time.Millisecond))
}

// ServerClockStepForwardNegative is its negative control: with the
// takeover decided by expires_at on the server's clock, the same step
// hands the key to the second client while the holder is still valid.
func ServerClockStepForwardNegative(t *testing.T, h Harness) {
	t.Parallel()
	at, vu := abandonedThenStep(t, h, Client{WallClockTakeover: true})
	if !at.Before(vu) {
		t.Fatal("negative control: no takeover before the holder's validity ended; the control does not control")
	}
	t.Logf("negative control: taken over %s before the holder's validity ended", vu.Sub(at).Round(time.Millisecond))
}

// ServerClockStepKeepsRenewedLease: a holder that keeps renewing
// through a forward step of the server's clock keeps its lease: its
// renewals succeed, and another client trying for two TTLs is refused
// naming it.
func ServerClockStepKeepsRenewedLease(t *testing.T, h Harness) {
	t.Parallel()
	a, b, step := stepServerClock(t, h, Client{})
	lA, err := a.Acquire(Ctx(t), lease.Request{Key: "job", TTL: stepTTL, Owner: "A"})
	if err != nil {
		t.Fatal(err)
	}
	hold := lease.NewHold(lA, a.Timeout())
	t.Cleanup(func() { _ = hold.Release(Ctx(t)) })
	step.Store(serverStep.Microseconds())
	ctx, cancel := context.WithTimeout(context.Background(), 2*stepTTL)
	defer cancel()
	_, err = b.Acquire(ctx, lease.Request{Key: "job", TTL: stepTTL, Owner: "B"})
	var re *lease.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, lease.ErrHeld) || re.Holder != "A" {
		t.Fatalf("MUTUAL EXCLUSION VIOLATED or wrong refusal: B's Acquire for %s while A renews: %v, want ErrHeld naming A", 2*stepTTL, err)
	}
	select {
	case <-hold.Done():
		t.Fatalf("A's hold was lost after the server's clock stepped: %v", hold.Err())
	default:
	}
	if err := lA.Extend(Ctx(t), 0); err != nil {
		t.Fatalf("A's Extend after the step: %v", err)
	}
}

// ServerClockStepBatchTakeover: the takeover counted on the
// contender's clock works for a batch (one round trip for all its keys):
// 200 keys abandoned by A, the server's clock stepped forward, and B's
// batches are refused for every key until A's validity of that key has
// ended, then granted for all of them, each with a higher fence.
func ServerClockStepBatchTakeover(t *testing.T, h Harness) {
	t.Parallel()
	a, b, step := stepServerClock(t, h, Client{})
	const n = 200
	reqs := make([]lease.Request, n)
	for i := range reqs {
		reqs[i] = lease.Request{Key: "batch-" + strconv.Itoa(i), TTL: stepTTL, Owner: "A"}
	}
	held := make([]lease.Lease, n)
	for i, r := range a.TryAcquireBatch(Ctx(t), reqs) {
		if r.Err != nil {
			t.Fatalf("A's batch, key %d: %v", i, r.Err)
		}
		held[i] = r.Lease
	}
	step.Store(serverStep.Microseconds())
	for i := range reqs {
		reqs[i].Owner = "B"
	}
	taken := 0
	for deadline := time.Now().Add(3*stepTTL + 30*time.Second); taken < n; {
		if time.Now().After(deadline) {
			t.Fatalf("B took over %d of %d abandoned keys", taken, n)
		}
		res := b.TryAcquireBatch(Ctx(t), reqs)
		now := time.Now()
		for i, r := range res {
			if r.Err != nil {
				continue
			}
			if vu := held[i].ValidUntil(); now.Before(vu) {
				t.Fatalf("MUTUAL EXCLUSION VIOLATED: %s taken over %s before A's validity ended", reqs[i].Key, vu.Sub(now))
			}
			if r.Lease.Fence() <= held[i].Fence() {
				t.Fatalf("FENCE WENT BACK on %s: %d after %d", reqs[i].Key, r.Lease.Fence(), held[i].Fence())
			}
			taken++
		}
		time.Sleep(100 * time.Millisecond) // pacing of the retries, not a wait for correctness
	}
}
