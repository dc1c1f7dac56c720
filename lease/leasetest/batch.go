package leasetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// batchSize is how many keys one TryAcquireBatch call takes: a tick of
// a large schedule.
const batchSize = 10000

// batchAttempts bounds the batches a loaded machine may need before one
// is answered in time (a timed-out round is refused with ErrNoQuorum,
// which is safe: it is a liveness failure, retried on fresh keys).
const batchAttempts = 3

// batchTTL is the TTL of the batch's leases: long enough to outlast a
// second batch on a loaded machine. The keys are used once only.
func (s *suite) batchTTL() time.Duration { return max(s.h.TTL, time.Minute) }

// testBatch: one TryAcquireBatch of 10,000 free keys grants every one,
// in order, each Lease with its Request's key and owner; a second batch
// of the same keys from another client is refused with ErrHeld, naming
// the holder, for each key. Neither batch ever grants a key wrongly; a
// batch whose round timed out (ErrNoQuorum only) is tried again. The
// time a batch takes is for benchmarks to measure, not asserted here.
func testBatch(t *testing.T, s *suite) {
	open := s.open
	if s.h.OpenBatch != nil {
		open = func(t *testing.T) lease.Backend { return s.warm(s.h.OpenBatch(t)) }
	}
	b1, b2 := open(t), open(t)
	var reqs []lease.Request
	var res []lease.Result
	for attempt := 1; ; attempt++ {
		base := s.key(t, "try"+itoa(attempt))
		reqs = make([]lease.Request, batchSize)
		for i := range reqs {
			reqs[i] = lease.Request{Key: base + "." + itoa(i), TTL: s.batchTTL(), Owner: "batch owner " + itoa(i)}
		}
		t0 := time.Now()
		res = b1.TryAcquireBatch(ctx(t, liveness), reqs)
		t.Logf("batch of %d free keys: %s", len(reqs), time.Since(t0).Round(time.Millisecond))
		if len(res) != len(reqs) {
			t.Fatalf("TryAcquireBatch returned %d results for %d requests", len(res), len(reqs))
		}
		late := checkFreeBatch(t, reqs, res)
		if late == 0 {
			break
		}
		if attempt == batchAttempts {
			t.Fatalf("%d of %d free keys refused for lack of a timely quorum in each of %d batches", late, len(reqs), attempt)
		}
		t.Logf("%d of %d free keys refused for lack of a timely quorum (loaded machine); trying fresh keys", late, len(reqs))
	}

	checkHeldBatch(t, b2, reqs, res[0].Lease.ValidUntil())
}

// checkHeldBatch asks b for the keys of reqs, which another client
// holds until validUntil: each must be refused as held, naming its
// holder. Keys refused for lack of a timely quorum (a loaded machine)
// are asked again, up to batchAttempts times in all.
func checkHeldBatch(t *testing.T, b lease.Backend, reqs []lease.Request, validUntil time.Time) {
	t.Helper()
	ask := make([]int, len(reqs)) // indexes of reqs still to be answered
	for i := range ask {
		ask[i] = i
	}
	for attempt := 1; ; attempt++ {
		again := make([]lease.Request, len(ask))
		for k, i := range ask {
			again[k] = lease.Request{Key: reqs[i].Key, TTL: reqs[i].TTL, Owner: "second batch"}
		}
		res := b.TryAcquireBatch(ctx(t, liveness), again)
		if len(res) != len(again) {
			t.Fatalf("second TryAcquireBatch returned %d results for %d requests", len(res), len(again))
		}
		if time.Now().After(validUntil) {
			t.Fatalf("the first batch's validity ran out before the second batch was answered")
		}
		var late []int
		bad := 0
		for k, r := range res {
			i := ask[k]
			var re *lease.RefusedError
			switch {
			case r.Err == nil:
				if bad++; bad <= 5 {
					t.Errorf("second batch, key %d (%s): granted (fence %d) while the first batch holds it", i, reqs[i].Key, r.Lease.Fence())
				}
			case errors.Is(r.Err, lease.ErrNoQuorum):
				late = append(late, i)
			case !errors.As(r.Err, &re) || !errors.Is(r.Err, lease.ErrHeld) || !strings.Contains(re.Key, reqs[i].Key) || re.Holder != reqs[i].Owner:
				if bad++; bad <= 5 {
					t.Errorf("second batch, key %d (%s): %v; want ErrHeld naming %q", i, reqs[i].Key, r.Err, reqs[i].Owner)
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%d of %d keys of the second batch were not refused as held", bad, len(res))
		}
		if len(late) == 0 {
			return
		}
		if attempt == batchAttempts {
			t.Fatalf("%d of %d held keys refused for lack of a timely quorum in each of %d batches, not as held", len(late), len(reqs), attempt)
		}
		t.Logf("second batch: %d of %d keys refused for lack of a timely quorum (loaded machine); asking them again", len(late), len(ask))
		ask = late
	}
}

// checkFreeBatch checks the results of a batch of free keys: each is a
// lease of its request's key and owner, or a refusal for lack of a
// timely quorum, whose number it returns.
func checkFreeBatch(t *testing.T, reqs []lease.Request, res []lease.Result) (late int) {
	t.Helper()
	bad := 0
	for i, r := range res {
		switch {
		case r.Err != nil && errors.Is(r.Err, lease.ErrNoQuorum) && r.Lease == nil:
			late++
		case r.Err != nil || r.Lease == nil:
			if bad++; bad <= 5 {
				t.Errorf("key %d (%s) of a free batch: lease %v, err %v", i, reqs[i].Key, r.Lease, r.Err)
			}
		case r.Lease.Key() != reqs[i].Key || r.Lease.Owner() != reqs[i].Owner:
			if bad++; bad <= 5 {
				t.Errorf("result %d is a lease of key %q owner %q, want %q %q", i, r.Lease.Key(), r.Lease.Owner(), reqs[i].Key, reqs[i].Owner)
			}
		case r.Lease.ValidUntil().IsZero():
			if bad++; bad <= 5 {
				t.Errorf("result %d: granted lease without validity", i)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d results of a batch of free keys are wrong", bad, len(res))
	}
	return late
}

// itoa is strconv.Itoa for non-negative ints, without the import.
func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var buf [20]byte
	n := len(buf)
	for ; i > 0; i /= 10 {
		n--
		buf[n] = byte('0' + i%10)
	}
	return string(buf[n:])
}
