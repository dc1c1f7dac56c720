package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// extendGuardScenario: one client with the default restart guard (the
// longest TTL it used) acquires the key with a 1 s TTL on nodes 0 and 1
// only (node 2 is cut off), extends it to 10 s, and node 0 restarts empty.
// The same client then tries to acquire the key again until the first
// lease's validity is nearly over. It returns the moment the second
// Acquire won while the first lease was valid (zero: never).
func extendGuardScenario(t *testing.T, ignoreExtend bool) time.Time {
	t.Helper()
	// long leaves the control's second Acquire seconds to win after node
	// 0 restarted and its 1 s guard passed, on a loaded machine too.
	const short, long = time.Second, 10 * time.Second
	cl := start(t, 3)
	// The nodes' data must be older than the longer TTL first: fresh
	// nodes do not vote for a guard after they start.
	waitVoting(t, newClient(t, cl.URLs(), redlock.WithRestartGuard(long+2*time.Second), redlock.WithTimeout(testTimeout)), nil)
	c := newClient(t, cl.ProxiedURLs(), redlock.WithTimeout(testTimeout),
		redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(50*time.Millisecond), 20)))
	if ignoreExtend {
		redlock.IgnoreExtendTTL(c)
	}
	cl.Nodes[2].Proxy().Cut()
	la, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t), TTL: short, Owner: "A"})
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := la.Extend(ctxT(t, 10*time.Second), long); err != nil {
		t.Fatalf("extend to %s: %v", long, err)
	}
	cl.Nodes[2].Proxy().Heal()
	cl.Nodes[0].Restart()
	validUntil := la.ValidUntil()
	var last error
	for time.Now().Before(validUntil.Add(-100 * time.Millisecond)) {
		lb, err := c.Acquire(context.Background(), lease.Request{Key: la.Key(), TTL: short, Owner: "B"})
		if err == nil {
			now := time.Now()
			_ = lb.Release(context.Background())
			if now.Before(validUntil) {
				t.Logf("second holder while the first is valid for %s more", validUntil.Sub(now))
				return now
			}
			return time.Time{}
		}
		refused(t, err, lease.ErrHeld)
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("no second holder while the first was valid; the last refusal: %v", last)
	return time.Time{}
}

// TestExtendRaisesRestartGuard: an Extend to a longer TTL raises the
// client's default restart guard, so a node that restarted empty does not
// vote again while the extended lease is valid.
func TestExtendRaisesRestartGuard(t *testing.T) {
	t.Parallel()
	if at := extendGuardScenario(t, false); !at.IsZero() {
		t.Fatal("double grant: the restarted node voted while the extended lease was valid")
	}
}

// TestExtendIgnoredDoubleGrant is the negative control: with the Extend's
// TTL left out of the guard, the restarted node votes after the first
// TTL and the same client wins the key a second time.
func TestExtendIgnoredDoubleGrant(t *testing.T) {
	t.Parallel()
	if at := extendGuardScenario(t, true); at.IsZero() {
		t.Fatal("negative control did not show the double grant")
	}
}
