package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

func TestEpochs(t *testing.T) {
	t.Parallel()
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			var attempts atomic.Int64
			ob := redlock.Observer{OnVote: func(e redlock.VoteEvent) {
				if e.Op == "acquire" {
					attempts.Add(1)
				}
			}}
			c := votingClient(t, cl.URLs(), redlock.WithObserver(ob),
				redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(10*time.Millisecond), 5)))
			k := key(t)
			const e = 1700000000
			l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Epoch: e, Owner: "tick"})
			if l.Epoch() != e {
				t.Errorf("Epoch() = %d", l.Epoch())
			}
			if err := l.Complete(context.Background()); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !l.ValidUntil().IsZero() {
				t.Error("lease still valid after Complete")
			}
			for _, ep := range []int64{e, e - 1, 1} {
				attempts.Store(0)
				_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Epoch: ep})
				re := refused(t, err, lease.ErrEpochDone)
				if re.DoneEpoch != e {
					t.Errorf("epoch %d: DoneEpoch = %d, want %d", ep, re.DoneEpoch, e)
				}
				// ErrEpochDone is final: one attempt, no retries (at most one
				// acquire vote per node).
				if a := attempts.Load(); a > int64(n) {
					t.Errorf("epoch %d: %d acquire votes, want one attempt (<= %d)", ep, a, n)
				}
			}
			// The completion released the lock: a later epoch, or no epoch,
			// is granted.
			l2 := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Epoch: e + 1})
			// A Complete after a newer holder took the key is refused
			// (ErrNotHeld), without a mark: the epoch stays open for it.
			if err := l2.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			l3 := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second})
			if err := l2.Complete(context.Background()); !errors.Is(err, lease.ErrNotHeld) {
				t.Fatalf("Complete after a newer holder took the key: %v, want ErrNotHeld", err)
			}
			_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Epoch: e + 1})
			refused(t, err, lease.ErrHeld)
			// l3 (no epoch) still holds the lock.
			if err := l3.Extend(context.Background(), 0); err != nil {
				t.Errorf("unrelated holder lost its lock to a Complete: %v", err)
			}
			// Complete without an epoch is Release.
			if err := l3.Complete(context.Background()); err != nil {
				t.Fatal(err)
			}
			mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second}).Release(context.Background())
		})
	}
}

// TestEpochCompleteQuorumOneDown: Complete reaches a quorum with one node
// down, and the mark then holds even when the down node comes back (any two
// quorums share a node).
func TestEpochCompleteQuorumOneDown(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Epoch: 42})
	cl.Nodes[0].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Complete(ctx); err != nil {
		t.Fatalf("Complete with one node down: %v", err)
	}
	_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Epoch: 42})
	refused(t, err, lease.ErrEpochDone)
	// The node that missed the mark comes back (empty); a quorum still
	// refuses epoch 42.
	cl.Nodes[0].Restart()
	waitVoting(t, c, nil)
	_, err = c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Epoch: 42})
	refused(t, err, lease.ErrEpochDone)
	// With a majority down Complete cannot finish and says so when ctx ends.
	l2 := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Epoch: 43})
	cl.Nodes[1].Kill()
	cl.Nodes[2].Kill()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	err = l2.Complete(ctx2)
	if !errors.Is(err, lease.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete with 2 of 3 down = %v, want ErrNoQuorum joined with the context's error", err)
	}
}
