package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// permanentKeys returns the keys on n that have no TTL, except the node's
// one data marker (leasecron:lease:birth: one key per node, whatever the
// number of leases).
func permanentKeys(t *testing.T, n *redistest.Node) []string {
	t.Helper()
	var out []string
	for _, k := range n.Keys("*") {
		ttl, err := n.Client().PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("PTTL %s on %s: %v", k, n.Addr(), err)
		}
		if ttl == -1 && k != "leasecron:lease:birth" { // -2: gone meanwhile
			out = append(out, k)
		}
	}
	return out
}

// TestReleasedLeasesLeaveNoPermanentKeys: locking many distinct keys
// (a lock per entity) must not grow Redis without bound: after 50 leases
// on 50 keys, each acquired and released (one by one and in a batch), no
// key without a TTL is left on any node, and the fencing counters expire
// within the fence expiry. The negative control: a lease with an epoch
// leaves its completion mark, which has no TTL by design, and the same
// check finds it.
func TestReleasedLeasesLeaveNoPermanentKeys(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	for i := range 50 {
		l := mustAcquire(t, c, lease.Request{Key: key(t, fmt.Sprint(i)), TTL: 5 * time.Second})
		if l.Fence() <= 0 {
			t.Fatalf("no fencing token: %d", l.Fence())
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := make([]lease.Request, 50)
	for i := range reqs {
		reqs[i] = lease.Request{Key: key(t, "batch", fmt.Sprint(i)), TTL: 5 * time.Second}
	}
	for _, r := range c.TryAcquireBatch(ctxT(t, 10*time.Second), reqs) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if err := r.Lease.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	all := map[string]bool{} // fencing counters on any node
	for _, n := range cl.Nodes {
		if ks := permanentKeys(t, n); len(ks) > 0 {
			t.Errorf("%s: %d keys without a TTL after every lease was released, e.g. %s", n.Addr(), len(ks), ks[0])
		}
		fences := n.Keys("*:lease")
		for _, k := range fences {
			all[k] = true
		}
		for _, k := range fences {
			ttl := n.Client().PTTL(context.Background(), k).Val()
			if ttl <= 0 || ttl > redlock.DefaultFenceExpiry {
				t.Errorf("%s: %s expires in %s, want (0, %s]", n.Addr(), k, ttl, redlock.DefaultFenceExpiry)
				break
			}
		}
	}
	// A node that the round no longer needed may skip an acquisition (it
	// was abandoned before it was sent), but a quorum stored every token.
	if len(all) != 100 {
		t.Errorf("%d fencing counters on the nodes, want one per key (100)", len(all))
	}

	// Negative control: a completed epoch stays, without a TTL.
	l := mustAcquire(t, c, lease.Request{Key: key(t, "epoch"), TTL: 5 * time.Second, Epoch: 7})
	if err := l.Complete(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.Nodes {
		ks := permanentKeys(t, n)
		if len(ks) != 1 || !strings.HasSuffix(ks[0], ":lease") {
			t.Errorf("%s: keys without a TTL %v, want the completion mark only", n.Addr(), ks)
		}
	}
}

// TestFenceAfterCounterExpired: once a key's fencing counters expired on
// every node, the next token comes from the time floor and is still
// greater than every earlier one; while they exist it is the counter + 1
// at least. The counter is kept for the fence expiry after each raise.
func TestFenceAfterCounterExpired(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	const expiry = time.Second
	c := votingClient(t, cl.URLs(), redlock.WithFenceExpiry(expiry))
	k := key(t)
	var last int64
	for round := range 2 {
		l1 := mustAcquire(t, c, lease.Request{Key: k, TTL: 200 * time.Millisecond})
		_ = l1.Release(ctxT(t, 5*time.Second))
		t2 := time.Now()
		l2 := mustAcquire(t, c, lease.Request{Key: k, TTL: 200 * time.Millisecond})
		_ = l2.Release(ctxT(t, 5*time.Second))
		if l1.Fence() <= last || l2.Fence() <= l1.Fence() {
			t.Fatalf("round %d: tokens %d, %d after %d: not increasing", round, l1.Fence(), l2.Fence(), last)
		}
		last = l2.Fence()
		kept := 0
		for _, n := range cl.Nodes {
			// The guard (300 ms in tests) and the TTL are below the
			// expiry: the counter lives for the expiry.
			ttl := n.Client().PTTL(context.Background(), leaseHash(k)).Val()
			if ttl == -2 {
				// Expired already (a slow machine), or the node missed
				// both acquisitions: a round decided by a quorum skips
				// the requests it has not sent yet.
				continue
			}
			if ttl <= 0 || ttl > expiry {
				t.Fatalf("round %d: %s: fencing counter expires in %s, want (0, %s]", round, n.Addr(), ttl, expiry)
			}
			kept++
		}
		if kept == 0 && time.Since(t2) < expiry {
			t.Fatalf("round %d: no node keeps the fencing counter", round)
		}
		if !waitFor(10*time.Second, func() bool {
			for _, n := range cl.Nodes {
				if len(n.Keys("{"+k+"}:*")) > 0 {
					return false
				}
			}
			return true
		}) {
			t.Fatalf("round %d: the key's fencing counters did not expire", round)
		}
	}
}
