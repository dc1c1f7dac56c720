package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestBatchChunksAndDuplicates: a batch larger than one script call's
// chunk (acquirebatch.lua takes 128 leases per call) is decided lease by
// lease as one call per lease would decide it: a key listed twice, in the
// same chunk or in two chunks, is granted once and refused once (the
// second request reads the first one's write, although the call read
// every key up front).
func TestBatchChunksAndDuplicates(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	var reqs []lease.Request
	for i := range 300 {
		reqs = append(reqs, lease.Request{Key: key(t, fmt.Sprint(i)), TTL: 10 * time.Second, Owner: fmt.Sprint("r", i)})
	}
	// Key 5 again in the same chunk (index 6) and in the third chunk
	// (index 299); key 200 again in the first chunk.
	reqs[6].Key, reqs[299].Key, reqs[7].Key = reqs[5].Key, reqs[5].Key, reqs[200].Key
	res := c.TryAcquireBatch(ctxT(t, 10*time.Second), reqs)
	won := map[string]int{}
	for i, r := range res {
		if r.Err != nil {
			refused(t, r.Err, lease.ErrHeld)
			continue
		}
		won[reqs[i].Key]++
		defer r.Lease.Release(context.Background())
	}
	if len(won) != 297 { // 300 requests, 3 of them for keys listed before
		t.Errorf("%d distinct keys won, want 297", len(won))
	}
	for k, n := range won {
		if n != 1 {
			t.Errorf("key %s granted %d times in one batch", k, n)
		}
	}
	// The same keys again, by another client: all held.
	other := votingClient(t, cl.URLs())
	for i, r := range other.TryAcquireBatch(ctxT(t, 10*time.Second), reqs[:10]) {
		if r.Err == nil {
			t.Errorf("key %d granted to a second client while held", i)
			_ = r.Lease.Release(context.Background())
		}
	}
}

// TestBatchFenceRound: when the nodes' counters disagree (here the
// counter of a previous holder is on one of 2 nodes, the other lost it), a
// batch takes its second, fencing round, in chunks of 128 leases per call
// like the acquire round: every lease's token is above the previous one,
// and a quorum (both nodes) stores it. With 2 nodes the quorum is 2, so
// both answers are always counted and the round always happens.
func TestBatchFenceRound(t *testing.T) {
	t.Parallel()
	cl := start(t, 2)
	var mu sync.Mutex
	fenceVotes := 0
	c := votingClient(t, cl.URLs(), redlock.WithObserver(redlock.Observer{OnVote: func(e redlock.VoteEvent) {
		if e.Op == "fence" && e.Vote == redlock.VoteGranted {
			mu.Lock()
			fenceVotes++
			mu.Unlock()
		}
	}}))
	ctx := ctxT(t, 10*time.Second)
	ahead := time.Now().Add(time.Hour).UnixMicro()
	var reqs []lease.Request
	for i := range 200 {
		k := key(t, fmt.Sprint(i))
		reqs = append(reqs, lease.Request{Key: k, TTL: 10 * time.Second, Owner: "a"})
		setLeaseField(t, cl.Nodes[0], k, "f", ahead)
	}
	for i, r := range c.TryAcquireBatch(ctx, reqs) {
		if r.Err != nil {
			t.Fatalf("key %d: %v", i, r.Err)
		}
		defer r.Lease.Release(context.Background())
		if r.Lease.Fence() <= ahead {
			t.Errorf("key %d: token %d not above the previous one %d", i, r.Lease.Fence(), ahead)
		}
		for j, n := range cl.Nodes {
			v, err := strconv.ParseInt(leaseField(t, n, reqs[i].Key, "f"), 10, 64)
			if err != nil || v != r.Lease.Fence() {
				t.Errorf("key %d: node %d's counter is %d (%v), want the token %d", i, j, v, err, r.Lease.Fence())
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fenceVotes != 2 {
		t.Errorf("%d granted fence votes, want one per node (one fencing round for the whole batch)", fenceVotes)
	}
}
