package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
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
