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

// scriptFlush empties the script cache of the given nodes (SCRIPT FLUSH),
// as an operator or a managed service's maintenance might.
func scriptFlush(t *testing.T, cl *redistest.Cluster, idx ...int) {
	t.Helper()
	for _, i := range idx {
		if err := cl.Nodes[i].Client().ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH on %s: %v", cl.Nodes[i].Addr(), err)
		}
	}
}

// TestScriptFlushReloaded: after SCRIPT FLUSH on 2 of 3 nodes the client's
// connections stay open, so nothing runs onConnect's SCRIPT LOAD again;
// the lanes must reload the scripts on NOSCRIPT and resend, so that
// single and batched acquisitions, releases and Ping work at once, and
// no lock key is left behind (the resent calls keep the lane's order).
func TestScriptFlushReloaded(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	l := mustAcquire(t, c, lease.Request{Key: key(t, "warm"), TTL: 5 * time.Second})
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		scriptFlush(t, cl, 0, 1)
		l, err := c.Acquire(ctxT(t, 5*time.Second), lease.Request{Key: key(t, "one"), TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: Acquire after SCRIPT FLUSH on 2 of 3 nodes: %v", round, err)
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		// A batch: many calls in one round, all on flushed nodes.
		scriptFlush(t, cl, 0, 1, 2)
		reqs := make([]lease.Request, 20)
		for i := range reqs {
			reqs[i] = lease.Request{Key: key(t, "batch", fmt.Sprint(i)), TTL: 5 * time.Second}
		}
		for i, r := range c.TryAcquireBatch(ctxT(t, 5*time.Second), reqs) {
			if r.Err != nil {
				t.Fatalf("round %d: batch key %d after SCRIPT FLUSH on every node: %v", round, i, r.Err)
			}
			if err := r.Lease.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("round %d: Release batch key %d: %v", round, i, err)
			}
		}
		scriptFlush(t, cl, 1, 2)
		for i, st := range c.Health(context.Background()) {
			if st.Err != nil || !st.Voting {
				t.Errorf("round %d: Ping of node %d after SCRIPT FLUSH: %+v", round, i, st)
			}
		}
	}
	// Every release was applied after its acquire: no lock is left.
	for _, n := range cl.Nodes {
		if ks := lockKeys(t, n); len(ks) > 0 {
			t.Errorf("%s: lock keys left behind: %v", n.Addr(), ks)
		}
	}
}

// TestScriptFlushNegativeControl switches the reload off: the same
// SCRIPT FLUSH then takes the two nodes out (every round fails with
// NOSCRIPT), and Ping must say so, since its check is a round like the
// others (a plain PING still answers).
func TestScriptFlushNegativeControl(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	redlock.DisableScriptReload(c)
	scriptFlush(t, cl, 0, 1)
	_, err := c.Acquire(ctxT(t, 5*time.Second), lease.Request{Key: key(t), TTL: 5 * time.Second})
	re := refused(t, err, lease.ErrNoQuorum)
	if !strings.Contains(re.Error(), "NOSCRIPT") {
		t.Errorf("refusal does not name NOSCRIPT: %v", re)
	}
	st := c.Health(context.Background())
	for i := range 2 {
		if st[i].Err == nil || st[i].Voting || !strings.Contains(st[i].Err.Error(), "NOSCRIPT") {
			t.Errorf("Ping of flushed node %d with the reload off: %+v, want a NOSCRIPT error and not voting", i, st[i])
		}
		if err := cl.Nodes[i].Client().Ping(context.Background()).Err(); err != nil {
			t.Errorf("node %d does not answer PING: %v", i, err)
		}
	}
	if st[2].Err != nil || !st[2].Voting {
		t.Errorf("Ping of the untouched node: %+v", st[2])
	}
}
