package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// warmInline runs Acquire+Release cycles on a key of its own until one ran
// on the caller's goroutine and the inline connection is ready. A cycle
// that fails (a round past the timeout on a loaded machine) is tried
// again: its lock key expires within a second.
func warmInline(t *testing.T, c *redlock.Client) {
	t.Helper()
	ok := waitFor(20*time.Second, func() bool {
		before := redlock.InlineRounds(c)
		l, err := c.Acquire(ctxT(t, 10*time.Second), lease.Request{Key: key(t, "warm"), TTL: time.Second, Owner: "warm"})
		if err != nil {
			return false
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			return false
		}
		_, _, ready := redlock.InlineConn(c)
		return redlock.InlineRounds(c) > before && ready
	})
	if !ok {
		t.Fatalf("no inline round after 20s (kills off: %v)", redlock.InlineKillOff(c))
	}
}

// TestInlineRounds: with one plain node, sequential single-key rounds
// (Acquire, Extend, Inspect, Release) run on the caller's goroutine once the
// inline connection is warm, and give the same results as through the
// lane; a batch of two keys goes through the lane; three nodes, a Sentinel
// node and a Cluster node have no fast path.
func TestInlineRounds(t *testing.T) {
	t.Parallel()
	rc := start(t, 1)
	c := votingClient(t, rc.URLs())
	if !redlock.HasInline(c) {
		t.Fatal("one redis:// node: no fast path")
	}
	warmInline(t, c)
	k := key(t)
	// Under load a cycle may leave the connection unused for more than
	// 100 ms (it then goes back through the lane once): wait for one
	// cycle whose four rounds all ran inline.
	cycle := func() int64 {
		before := redlock.InlineRounds(c)
		l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "me"})
		if err := l.Extend(ctxT(t, 5*time.Second), 0); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		info, err := c.Inspect(ctxT(t, 5*time.Second), k)
		if err != nil || info.Holder != "me" || info.Answered != 1 {
			t.Fatalf("Inspect while held: %+v, %v", info, err)
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if ks := lockKeys(t, rc.Nodes[0]); len(ks) != 0 {
			t.Fatalf("lock keys after Release: %v", ks)
		}
		return redlock.InlineRounds(c) - before
	}
	if !waitFor(20*time.Second, func() bool { return cycle() == 4 }) {
		t.Fatal("no Acquire/Extend/Inspect/Release cycle ran all inline in 20s")
	}

	// A batch of two keys: the lane, even with the connection warm (the
	// rounds right before and after it run inline).
	if !waitFor(20*time.Second, func() bool {
		b0 := redlock.InlineRounds(c)
		l := mustAcquire(t, c, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "me"})
		b1 := redlock.InlineRounds(c)
		res := c.TryAcquireBatch(ctxT(t, 5*time.Second), []lease.Request{
			{Key: k + ".b1", TTL: 10 * time.Second}, {Key: k + ".b2", TTL: 10 * time.Second}})
		b2 := redlock.InlineRounds(c)
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("batch key %d: %v", i, r.Err)
			}
			if err := r.Lease.Release(ctxT(t, 5*time.Second)); err != nil {
				t.Fatalf("Release batch key %d: %v", i, err)
			}
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if b2 != b1 {
			t.Fatalf("a batch of 2 keys ran %d round(s) inline", b2-b1)
		}
		return b1 == b0+1
	}) {
		t.Fatal("the single-key acquire before the batch never ran inline")
	}

	rc3 := start(t, 3)
	c3 := votingClient(t, rc3.URLs())
	if redlock.HasInline(c3) {
		t.Fatal("three nodes: a fast path")
	}
	for i := 0; i < 5; i++ {
		l := mustAcquire(t, c3, lease.Request{Key: k, TTL: 10 * time.Second})
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("K=3 Release: %v", err)
		}
	}
	if n := redlock.InlineRounds(c3); n != 0 {
		t.Fatalf("K=3: %d inline rounds", n)
	}
	for _, u := range []string{"redis+sentinel://127.0.0.1:1?master_name=m", "redis+cluster://127.0.0.1:1"} {
		cs := newClient(t, []string{u})
		if redlock.HasInline(cs) {
			t.Errorf("%s: a fast path", u)
		}
	}
}

// TestInlineTLS: the fast path of one rediss:// node (a private CA, a
// password) sets up its own connection with the client's TLS settings and
// runs rounds inline.
func TestInlineTLS(t *testing.T) {
	t.Parallel()
	ca := redistest.NewCA(t)
	rc := start(t, 1, redistest.WithTLS(ca), redistest.WithPassword("s3cret-inline"))
	c := votingClient(t, rc.TLSURLs(), redlock.WithTLSConfig(ca.ClientConfig()))
	if !redlock.HasInline(c) {
		t.Fatal("one rediss:// node: no fast path")
	}
	warmInline(t, c)
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 10 * time.Second})
	if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestInlineCallerDeadline: a caller's ctx that ends before the per-node
// timeout ends an inline round at its deadline, with the context's error,
// like the lane path.
func TestInlineCallerDeadline(t *testing.T) {
	t.Parallel()
	rc := start(t, 1)
	fwd := newDelayFwd(t, rc.Nodes[0].Addr())
	c := votingClient(t, []string{"redis://" + fwd.Addr()}, redlock.WithTimeout(5*time.Second))
	warmInline(t, c)
	k := key(t)
	if !waitFor(20*time.Second, func() bool {
		_, addr, _ := redlock.InlineConn(c)
		fwd.Delay(addr, time.Second)
		before := redlock.InlineRounds(c)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		began := time.Now()
		info, err := c.Inspect(ctx, k)
		took := time.Since(began)
		fwd.Delay(addr, 0)
		if redlock.InlineRounds(c) == before {
			warmInline(t, c)
			return false
		}
		if err == nil || !errors.Is(info.NodeErrs, context.DeadlineExceeded) {
			t.Fatalf("Inspect past the caller's deadline: %v, want context.DeadlineExceeded", err)
		}
		if took > 3*time.Second {
			t.Fatalf("Inspect returned after %s with a 200ms deadline", took)
		}
		return true
	}) {
		t.Fatal("Inspect never ran inline in 20s")
	}
}

// TestInlineSparseCalls: calls further apart than the inline connection
// stays fresh (100 ms) go through the lane without setting a connection up
// for each (it would be stale by the next call); calls close together
// set one up and then run inline.
func TestInlineSparseCalls(t *testing.T) {
	t.Parallel()
	rc := start(t, 1)
	c := votingClient(t, rc.URLs(), redlock.WithTimeout(testTimeout))
	warmInline(t, c)
	k := key(t)
	time.Sleep(200 * time.Millisecond)
	warmups, rounds := redlock.InlineWarmups(c), redlock.InlineRounds(c)
	for range 8 {
		time.Sleep(150 * time.Millisecond)
		if _, err := c.Inspect(ctxT(t, 5*time.Second), k); err != nil {
			t.Fatalf("Inspect: %v", err)
		}
	}
	if n := redlock.InlineWarmups(c) - warmups; n != 0 {
		t.Errorf("8 calls 150 ms apart started %d set-ups of the inline connection, want 0", n)
	}
	if n := redlock.InlineRounds(c) - rounds; n != 0 {
		t.Errorf("%d of 8 calls 150 ms apart ran inline on a stale connection", n)
	}
	// Control: calls close together do set it up and run inline.
	ok := waitFor(10*time.Second, func() bool {
		before := redlock.InlineRounds(c)
		for range 5 {
			if _, err := c.Inspect(ctxT(t, 5*time.Second), k); err != nil {
				t.Fatalf("Inspect: %v", err)
			}
		}
		return redlock.InlineRounds(c) > before
	})
	if !ok {
		t.Error("calls close together never ran inline")
	}
}
