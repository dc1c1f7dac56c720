package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/etcdtest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/etcd"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestEpochsFencesNotes: refusal detail, epochs, fencing, release and
// notes on a real cluster, between two clients.
func TestEpochsFencesNotes(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a, b := open(t, c.Endpoints(), "/t1/"), open(t, c.Endpoints(), "/t1/")
	ctx := ctxT(t, 30*time.Second)
	// a holds the lease longer than b's Acquire below may wait for it.
	const heldTTL = 10 * time.Second
	req := lease.Request{Key: "job", TTL: heldTTL, Epoch: 100, Owner: "host=a"}
	t0 := time.Now()
	la, err := a.Acquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if v := la.ValidUntil(); v.After(t0.Add(heldTTL)) || v.Before(time.Now()) {
		t.Fatalf("validity %s not within (now, start+ttl]", time.Until(v))
	}
	res := b.TryAcquireBatch(ctx, []lease.Request{{Key: "job", TTL: testTTL, Epoch: 100, Owner: "host=b"}})
	var re *lease.RefusedError
	if !errors.As(res[0].Err, &re) || re.Reason != lease.ErrHeld || re.Holder != "host=a" || re.HolderTTL <= 0 || re.HolderNodes != b.Quorum() {
		t.Fatalf("second client: %v (%+v)", res[0].Err, re)
	}
	// Acquire retries while the lease is held and, at its context's end,
	// returns the last refusal with the context's error. It needs one
	// attempt answered: each has the 200 ms request timeout, which a
	// loaded machine's etcd missed for a whole 300 ms budget once (in 43
	// CI runs); 1.5 s leaves room for several.
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = b.Acquire(short, lease.Request{Key: "job", TTL: testTTL, Epoch: 100})
	cancel()
	if !errors.Is(err, lease.ErrHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while held: %v", err)
	}
	in, err := b.Inspect(ctx, "job")
	if err != nil || in.Holder != "host=a" || in.Fence != la.Fence() || in.TTL <= 0 || in.TTL > heldTTL {
		t.Fatalf("inspect: %+v, %v (fence %d)", in, err, la.Fence())
	}
	if err := la.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range []int64{99, 100} {
		_, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: testTTL, Epoch: e})
		if !errors.Is(err, lease.ErrEpochDone) {
			t.Fatalf("epoch %d after completing 100: %v", e, err)
		}
	}
	lb, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: testTTL, Epoch: 101, Owner: "host=b"})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence %d not above the earlier holder's %d", lb.Fence(), la.Fence())
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lb.Extend(ctx, 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("extend after release: %v", err)
	}
	lc, err := a.Acquire(ctx, lease.Request{Key: "job", TTL: testTTL, Epoch: 101}) // released, not completed
	if err != nil {
		t.Fatalf("released epoch not taken over: %v", err)
	}
	if lc.Fence() <= lb.Fence() {
		t.Fatalf("fence %d not above %d", lc.Fence(), lb.Fence())
	}
	// Notes: a lower version never overwrites a higher one.
	for _, v := range []int64{5, 3, 5, 7, 6} {
		if err := a.SetNote(ctx, "job", v, fmt.Sprintf("note %d", v)); err != nil {
			t.Fatal(err)
		}
	}
	if in, err := b.Inspect(ctx, "job"); err != nil || in.NoteVersion != 7 || in.Note != "note 7" || in.DoneEpoch != 100 {
		t.Fatalf("inspect: %+v, %v", in, err)
	}
}

// TestExtendAfterRevoke: Extend reports ErrNotHeld once the etcd lease is
// gone (revoked behind the client's back), and the key is free then.
func TestExtendAfterRevoke(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	a := open(t, c.Endpoints(), "/t2/")
	ctx := ctxT(t, 30*time.Second)
	l, err := a.Acquire(ctx, lease.Request{Key: "k", TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	before := l.ValidUntil()
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	if err := l.Extend(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if v := l.ValidUntil(); !v.After(before) || v.After(t0.Add(testTTL)) {
		t.Fatalf("extended validity %s: not after %s or past start+ttl", v, before)
	}
	if _, err := a.Client().Revoke(ctx, l.(*etcd.Lease).LeaseID()); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("extend of a revoked lease: %v", err)
	}
	if _, err := a.Acquire(ctx, lease.Request{Key: "k", TTL: testTTL}); err != nil {
		t.Fatal(err)
	}
}

// TestBatchExclusive: two clients race for 300 keys (three transaction
// chunks) in one batch each: every key is won exactly once, fences are
// distinct per revision chunk, and completed epochs are refused.
func TestBatchExclusive(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t)
	// A 2 s timeout: a batch under the race detector on a loaded machine
	// is slow, and a timed-out chunk is refused for both clients.
	cl := []*etcd.Backend{openT(t, c.Endpoints(), "/t3/", 2*time.Second), openT(t, c.Endpoints(), "/t3/", 2*time.Second)}
	ctx := ctxT(t, 60*time.Second)
	const n = 300
	reqs := make([]lease.Request, n)
	for i := range reqs {
		// Long enough for 300 Completes one after the other on a loaded
		// machine: the test is about who wins, not about expiry.
		reqs[i] = lease.Request{Key: fmt.Sprintf("job%03d", i), TTL: time.Minute, Epoch: 10}
	}
	res := make([][]lease.Result, 2)
	var wg sync.WaitGroup
	for j := range cl {
		wg.Go(func() { res[j] = cl[j].TryAcquireBatch(ctx, reqs) })
	}
	wg.Wait()
	for i := range reqs {
		won := 0
		for j := range cl {
			if r := res[j][i]; r.Err == nil {
				won++
				if err := r.Lease.Complete(ctx); err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(r.Err, lease.ErrHeld) && !errors.Is(r.Err, lease.ErrEpochDone) {
				t.Fatalf("key %d client %d: %v", i, j, r.Err)
			}
		}
		if won != 1 {
			t.Fatalf("key %d won by %d clients", i, won)
		}
	}
	for i, r := range cl[0].TryAcquireBatch(ctx, reqs) {
		if !errors.Is(r.Err, lease.ErrEpochDone) {
			t.Fatalf("key %d after completion: %v", i, r.Err)
		}
	}
}
