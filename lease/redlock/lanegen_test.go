package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// laneLateAcquire: a client of three nodes, each behind a forwarder,
// sends an Acquire whose bytes to nodes 0 and 1 are held back for longer
// than the lanes' read timeout (10 s), as TCP retransmission in a network
// blip would. The Acquire fails at the per-node timeout (node 2 alone
// granted) and queues its cleanup release behind it on every lane; on
// nodes 0 and 1 the release goes on a new connection once the held round
// timed out, and reaches the node before the held acquire. It returns the
// lock keys of the key on nodes 0 and 1 once the held acquires were
// delivered (and a moment more, for the server to apply them).
func laneLateAcquire(t *testing.T, generations bool) []string {
	t.Helper()
	const hold = 13 * time.Second
	cl := start(t, 3)
	var fwds []*delayFwd
	var urls []string
	for _, nd := range cl.Nodes {
		f := newDelayFwd(t, nd.Addr())
		fwds = append(fwds, f)
		urls = append(urls, "redis://"+f.Addr())
	}
	c := votingClient(t, urls)
	if !generations {
		redlock.DisableLaneGenerations(c)
	}
	k := key(t)
	fwds[0].HoldAll(hold)
	fwds[1].HoldAll(hold)
	_, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: k, TTL: time.Minute, Owner: "late"})
	fwds[0].HoldAll(0)
	fwds[1].HoldAll(0)
	if !errors.Is(err, lease.ErrNoQuorum) {
		t.Fatalf("Acquire with nodes 0 and 1 held back: %v, want ErrNoQuorum", err)
	}
	if !waitFor(hold+20*time.Second, func() bool { return fwds[0].Held() > 0 && fwds[1].Held() > 0 }) {
		t.Fatal("the held-back acquires were never delivered")
	}
	var left []string
	waitFor(2*time.Second, func() bool {
		left = left[:0]
		for _, nd := range cl.Nodes[:2] {
			for _, lk := range lockKeys(t, nd) {
				if lk == leaseHash(k) {
					left = append(left, nd.Addr()+" "+lk)
				}
			}
		}
		return len(left) == 2
	})
	return left
}

// TestLaneTimeoutNotOvertaken: after a lane round failed on its connection
// (here the lanes' read timeout), the next round raises the lane's
// generation on the node in front of its calls, so the timed-out acquire,
// arriving after its own cleanup release, is refused: no lock is left.
func TestLaneTimeoutNotOvertaken(t *testing.T) {
	t.Parallel()
	if left := laneLateAcquire(t, true); len(left) != 0 {
		t.Fatalf("the late acquire left locks behind its release: %v", left)
	}
}

// TestLaneTimeoutOvertakenWithoutGenerations is the negative control:
// without the generation the late acquire is applied after its release
// and leaves its lock for its whole TTL on a quorum of nodes.
func TestLaneTimeoutOvertakenWithoutGenerations(t *testing.T) {
	t.Parallel()
	if left := laneLateAcquire(t, false); len(left) != 2 {
		t.Fatalf("negative control: the late acquire left locks %v, want one on each of nodes 0 and 1", left)
	}
}
