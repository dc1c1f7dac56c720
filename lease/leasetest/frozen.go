package leasetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// testFrozenMinority freezes (SIGSTOP) one server at a time — whichever
// the clients are connected to, the leader of an ensemble or cluster
// among them — for two TTLs, while the others keep a quorum. Throughout,
// two clients take a fresh key after another and each holds one key
// (renewed by a Hold): every client must take a key at least once per
// TTL (a daemon's ticks go on while a quorum is up), and no hold may be
// lost. A backend with fewer than three servers has no minority to
// freeze; the test then only logs so.
func testFrozenMinority(t *testing.T, s *suite) {
	if s.h.Servers < 3 {
		t.Logf("%s: %d server(s): freezing one leaves no quorum", s.h.Name, s.h.Servers)
		return
	}
	for i := range s.h.Servers {
		t.Run(fmt.Sprintf("server%d", i), func(t *testing.T) { s.freezeOne(t, i) })
	}
}

// freezeOne freezes server i and checks the clients' progress.
func (s *suite) freezeOne(t *testing.T, i int) {
	const clients = 2
	var bs []lease.Backend
	var holds []*watchedHold
	for c := range clients {
		b := s.open(t)
		bs = append(bs, b)
		l := mustAcquire(t, b, lease.Request{Key: s.key(t, fmt.Sprint("held", c)), TTL: s.h.TTL, Owner: "holder"})
		holds = append(holds, watch(t, fmt.Sprintf("client %d's hold", c), l, b.Timeout()))
	}
	run, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wins := make([][]time.Time, clients)
	errs := make([]error, clients)
	for c, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wins[c], errs[c] = TakeFresh(run, b, s.key(t, fmt.Sprint("fresh", c)), s.h.TTL)
		}()
	}
	f := s.faults(t)
	f.pause(i)
	from := time.Now()
	time.Sleep(2 * s.h.TTL) // the freeze; the clients work meanwhile
	to := time.Now()
	for _, w := range holds {
		select {
		case <-w.closed:
			t.Errorf("%s lost while server %d was frozen: %v", w.name, i, w.h.Err())
		default:
		}
	}
	stop()
	wg.Wait()
	f.heal()
	for c, ws := range wins {
		gap := LongestGap(ws, from, to)
		t.Logf("client %d: %d keys taken while server %d was frozen, longest gap %s", c, len(ws), i, gap.Round(time.Millisecond))
		if gap > s.h.TTL {
			t.Errorf("client %d took no key for %s while server %d was frozen and the others had a quorum (bound: the TTL, %s); last refusal: %v",
				c, gap.Round(time.Millisecond), i, s.h.TTL, errs[c])
		}
	}
}

// TakeFresh has b take keys prefix.0, prefix.1, ... one after another
// (each released at once) until ctx ends, and returns when each was
// taken and the last refusal.
func TakeFresh(ctx context.Context, b lease.Backend, prefix string, ttl time.Duration) ([]time.Time, error) {
	var wins []time.Time
	var last error
	for n := 0; ctx.Err() == nil; n++ {
		res := b.TryAcquireBatch(ctx, []lease.Request{{Key: fmt.Sprintf("%s.%d", prefix, n), TTL: ttl, Owner: "taker"}})
		if res[0].Err != nil {
			if ctx.Err() == nil {
				last = res[0].Err
			}
			select {
			case <-ctx.Done():
			case <-time.After(lease.Jitter(20 * time.Millisecond)):
			}
			continue
		}
		wins = append(wins, time.Now())
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = res[0].Lease.Release(rctx)
		cancel()
	}
	return wins, last
}

// LongestGap is the longest stretch of [from, to] without a time of ws.
func LongestGap(ws []time.Time, from, to time.Time) time.Duration {
	last, gap := from, time.Duration(0)
	for _, w := range ws {
		if w.Before(from) {
			continue
		}
		if w.After(to) {
			break
		}
		gap = max(gap, w.Sub(last))
		last = w
	}
	return max(gap, to.Sub(last))
}
