package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestExtendSpreads: a lease won on a bare quorum (the other nodes had a
// foreign lock at the time) takes the lock on those nodes at its next
// extend, and then survives losing one of the nodes it was won on. A node
// whose completed epoch covers the lease's is left alone, and an extend
// that starts after the validity ended does not spread.
func TestExtendSpreads(t *testing.T) {
	t.Parallel()
	cl := start(t, 5)
	c := votingClient(t, cl.URLs(), redlock.WithTimeout(200*time.Millisecond))
	k := key(t)
	ctx := ctxT(t, 30*time.Second)
	// Nodes 3 and 4 hold someone else's lock for 300 ms.
	for _, n := range cl.Nodes[3:] {
		setLock(t, n, k, "foreign", 300*time.Millisecond)
	}
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "a", Epoch: 7})
	if !waitFor(5*time.Second, func() bool { return len(lockKeys(t, cl.Nodes[3])) == 0 && len(lockKeys(t, cl.Nodes[4])) == 0 }) {
		t.Fatal("the foreign locks did not expire")
	}
	// Node 4 has epoch 7 completed (as if a completion reached only it).
	setLeaseField(t, cl.Nodes[4], k, "e", 7)
	if err := l.Extend(ctx, 0); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	owner := func(i int) string {
		v, _ := lockOf(t, cl.Nodes[i].Client(), k)
		return v
	}
	if !waitFor(2*time.Second, func() bool { return owner(3) != "" }) {
		t.Fatal("the lease did not spread to node 3")
	}
	if v := owner(0); owner(3) != v || v == "" {
		t.Errorf("node 3 lock = %q, node 0 lock = %q; want the lease's value", owner(3), v)
	}
	if v := owner(4); v != "" {
		t.Errorf("node 4 (epoch completed) got the lock %q", v)
	}
	// One of the nodes the lease was won on dies: 0,1,2,3 still hold it
	// minus node 0 = 3, a quorum of 5.
	cl.Nodes[0].Kill()
	if err := l.Extend(ctx, 0); err != nil {
		t.Fatalf("Extend after losing node 0: %v", err)
	}

	// After the validity ended an extend does not take missing locks.
	l2 := mustAcquire(t, c, lease.Request{Key: k + "-short", TTL: 300 * time.Millisecond, Owner: "b"})
	time.Sleep(400 * time.Millisecond)
	err := l2.Extend(ctx, time.Second)
	if !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrNoQuorum) {
		t.Errorf("Extend after validity = %v, want ErrNotHeld", err)
	}
	for i, n := range cl.Nodes[1:] {
		if v, _ := lockOf(t, n.Client(), k+"-short"); v != "" {
			t.Errorf("node %d: expired lease was re-taken: %q", i+1, v)
		}
	}
}
