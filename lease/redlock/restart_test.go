package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// restartScenario sets up the double-grant situation of the Redlock
// analysis: client A holds key on nodes 0 and 1 only (node 2 was cut off
// from A), then node 0 restarts empty. A second client B that counts node
// 0's grant gets nodes 0 and 2: two of three, while A is still valid.
// It returns A's lease; B is the caller's client on the direct URLs.
func restartScenario(t *testing.T, cl interface {
	ProxiedURLs() []string
}, cut func(), restart func(), ttl time.Duration) lease.Lease {
	t.Helper()
	a := newClient(t, cl.ProxiedURLs(), redlock.WithoutRestartDetection(), redlock.WithTimeout(testTimeout),
		redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(50*time.Millisecond), 20)))
	cut()
	la, err := a.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t), TTL: ttl, Owner: "A"})
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	restart()
	return la
}

// TestRestartDetection: with restart detection on (the default), a node
// that restarted empty while a lease was held does not vote for the restart
// guard, so no second holder gets the lease during the first one's
// validity.
func TestRestartDetection(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	ttl := 3 * time.Second
	// B's restart guard equals the TTL; it must see nodes 1 and 2 voting
	// before the scenario starts (fresh nodes do not vote for a guard).
	b := newClient(t, cl.URLs(), redlock.WithRestartGuard(ttl), redlock.WithTimeout(testTimeout))
	waitVoting(t, b, nil)
	la := restartScenario(t, cl,
		func() { cl.Nodes[2].Proxy().Cut() },
		func() { cl.Nodes[0].Restart() }, ttl)
	validUntil := la.ValidUntil()
	k := la.Key()
	if got := lockKeys(t, cl.Nodes[2]); len(got) != 0 {
		t.Fatalf("node 2 was cut off from A but holds %v", got)
	}

	sawRestarted := false
	attempts := 0
	for time.Now().Before(validUntil.Add(-100 * time.Millisecond)) {
		attempts++
		lb, err := b.Acquire(context.Background(), lease.Request{Key: k, TTL: ttl, Owner: "B"})
		if err == nil {
			if time.Now().Before(validUntil) {
				t.Fatalf("double grant: B acquired %s while A is valid", time.Until(validUntil))
			}
			_ = lb.Release(context.Background())
			break
		}
		re := refused(t, err, lease.ErrHeld)
		if errors.Is(err, lease.ErrRestarted) {
			sawRestarted = true
			// The refusal's time left counts the restarted node as free
			// only once it votes again: not "free in 0s" while A holds.
			if left := time.Until(validUntil); left > 0 && (re.HolderTTL < left || re.HolderTTL > ttl) {
				t.Errorf("refusal says the key is free in %s (holder %q); A's validity has %s left, the TTL is %s", re.HolderTTL, re.Holder, left, ttl)
			}
			if in, err := b.Inspect(ctxT(t, 5*time.Second), k); err == nil {
				if left := time.Until(validUntil); left > 0 && in.TTL < left {
					t.Errorf("Inspect says the key is free in %s; A's validity has %s left", in.TTL, left)
				}
			}
			var names []string
			for _, ne := range nodeErrors(err) {
				if errors.Is(ne, lease.ErrRestarted) {
					names = append(names, ne.Node)
				}
			}
			if !slices.Equal(names, []string{b.Servers()[0]}) {
				t.Errorf("not-voting nodes %v, want only the restarted %s", names, b.Servers()[0])
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawRestarted {
		t.Fatalf("in %d attempts no refusal was due to the restarted node (ErrRestarted)", attempts)
	}
	if st := b.Health(context.Background()); st[0].RestartedAt.IsZero() || !st[1].RestartedAt.IsZero() {
		t.Errorf("Ping does not report the restart: %+v", st)
	}
	// Once A's lease has expired, B gets it from the two nodes that vote.
	time.Sleep(time.Until(validUntil))
	lb, err := b.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: ttl, Owner: "B"})
	if err != nil {
		// A's lock on node 1 may outlive A's validity by drift + elapsed.
		if !waitFor(5*time.Second, func() bool {
			lb, err = b.Acquire(context.Background(), lease.Request{Key: k, TTL: ttl, Owner: "B"})
			return err == nil
		}) {
			t.Fatalf("B after A's validity: %v", err)
		}
	}
	_ = lb.Release(context.Background())
}

// TestRestartWithoutDetectionDoubleGrant is the negative control: the
// same scenario with restart detection switched off gives B the lease while
// A's is still valid.
func TestRestartWithoutDetectionDoubleGrant(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	ttl := 3 * time.Second
	b := newClient(t, cl.URLs(), redlock.WithoutRestartDetection(), redlock.WithTimeout(testTimeout),
		redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(20*time.Millisecond), 50)))
	waitVoting(t, b, nil)
	la := restartScenario(t, cl,
		func() { cl.Nodes[2].Proxy().Cut() },
		func() { cl.Nodes[0].Restart() }, ttl)
	lb, err := b.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: la.Key(), TTL: ttl, Owner: "B"})
	now := time.Now()
	if err != nil {
		t.Fatalf("negative control did not show the double grant: %v", err)
	}
	defer lb.Release(context.Background())
	if !now.Before(la.ValidUntil()) {
		t.Fatalf("B acquired %s after A's validity; the scenario is too slow to show a double grant", now.Sub(la.ValidUntil()))
	}
	t.Logf("double grant without restart detection: B holds while A is valid for %s more", la.ValidUntil().Sub(now))
}

// TestFencingMonotonic: fencing tokens strictly increase across 1,000
// sequential holders while nodes are killed and restarted empty.
func TestFencingMonotonic(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs(), redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(10*time.Millisecond), 300)))
	k := key(t)
	ctx := ctxT(t, 90*time.Second)
	var prev int64
	for i := range 1000 {
		j := (i / 100) % 3
		switch i % 100 {
		case 30:
			cl.Nodes[j].Kill()
		case 60:
			cl.Nodes[j].Restart() // back, empty
		case 90:
			cl.Nodes[j].Restart() // restart empty while running
		}
		l, err := c.Acquire(ctx, lease.Request{Key: k, TTL: 2 * time.Second, Owner: "h"})
		if err != nil {
			t.Fatalf("holder %d: %v", i, err)
		}
		if l.Fence() <= prev {
			t.Fatalf("holder %d: fence %d not greater than %d", i, l.Fence(), prev)
		}
		prev = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatalf("holder %d release: %v", i, err)
		}
	}
}

// TestFencingQuorumRegister checks the quorum register itself, with a
// counter far above the time floor so that the floor cannot help: the
// token a holder stored on a quorum is exceeded by the next holder, also
// right after a node restarted empty (it does not vote, so the next read
// quorum is the two nodes that kept their data).
func TestFencingQuorumRegister(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs(), redlock.WithRestartGuard(time.Second),
		redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(20*time.Millisecond), 20)))
	k := key(t)
	high := time.Now().Add(24*time.Hour).UnixMicro() + 12345
	// Simulate an earlier holder whose token is above the time floor.
	for _, nd := range cl.Nodes[1:] {
		setLeaseField(t, nd, k, "f", high)
	}
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second})
	if l.Fence() != high+1 {
		t.Fatalf("fence = %d, want %d", l.Fence(), high+1)
	}
	_ = l.Release(context.Background())
	// Node 1 restarts empty and does not vote for the guard (1 s).
	cl.Nodes[1].Restart()
	l = mustAcquire(t, c, lease.Request{Key: k, TTL: time.Second})
	if l.Fence() <= high+1 {
		t.Fatalf("after a restart fence = %d, want > %d", l.Fence(), high+1)
	}
	_ = l.Release(context.Background())
	if l := mustAcquire(t, votingClient(t, cl.URLs(), redlock.WithoutFencing()), lease.Request{Key: k, TTL: time.Second}); l.Fence() != 0 {
		t.Errorf("WithoutFencing: Fence() = %d", l.Fence())
	}
}
