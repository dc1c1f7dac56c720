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
// among them — for two TTLs (longer for a store that elects, see
// waitFreeze), while the others keep a quorum. Throughout, two clients
// take a fresh key after another and each holds one key (renewed by a
// Hold): every client must take a key at least once per TTL (a daemon's
// ticks go on while a quorum is up), and no hold may be lost. A store
// that takes no write until its servers have elected another leader
// (Harness.Serving) is held to that from the last time it began to serve
// again: a hold given up before then, or within three request timeouts
// after it (a client on the frozen server leaving it), is logged, and the
// clients must take a key within a TTL of it. A backend with fewer than
// three servers has no minority to freeze; the test then only logs so.
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
	servedAt, everServed, to := s.waitFreeze(t, from) // the clients work meanwhile
	switch {
	case !everServed:
		t.Errorf("the store took no write for the whole freeze of server %d (%s) although the others had a quorum", i, to.Sub(from).Round(time.Millisecond))
		servedAt = to
	case servedAt.IsZero():
		t.Logf("the store was electing again at the end of the freeze (%s): no stretch to hold the clients to", to.Sub(from).Round(time.Millisecond))
		servedAt = to
	case servedAt.After(from):
		t.Logf("the store served %s after server %d froze", servedAt.Sub(from).Round(time.Millisecond), i)
	}
	// A client whose session is on the frozen server renews only once it
	// left it: a request there times out, a handshake elsewhere, then the
	// renewal — three request timeouts after the store serves again.
	failover := 3 * bs[0].Timeout()
	for _, w := range holds {
		select {
		case <-w.closed:
			w.mu.Lock()
			lostAt := w.doneAt
			w.mu.Unlock()
			if lostAt.Before(servedAt) {
				t.Logf("%s given up %s before the store served again: %v", w.name, servedAt.Sub(lostAt).Round(time.Millisecond), w.h.Err())
				continue
			}
			if lostAt.Before(servedAt.Add(failover)) {
				t.Logf("%s given up %s after the store served again, within a client's failover (%s): %v",
					w.name, lostAt.Sub(servedAt).Round(time.Millisecond), failover, w.h.Err())
				continue
			}
			t.Errorf("%s lost while server %d was frozen: %v", w.name, i, w.h.Err())
		default:
		}
	}
	stop()
	wg.Wait()
	f.heal()
	for c, ws := range wins {
		gap := LongestGap(ws, servedAt, to)
		t.Logf("client %d: %d keys taken while server %d was frozen, longest gap %s", c, len(ws), i, gap.Round(time.Millisecond))
		if gap > s.h.TTL {
			t.Errorf("client %d took no key for %s while server %d was frozen and the others had a quorum serving (bound: the TTL, %s); last refusal: %v",
				c, gap.Round(time.Millisecond), i, s.h.TTL, errs[c])
		}
	}
}

// waitFreeze waits out the freeze that began at from: two TTLs, and for
// a store that takes no write until its servers have elected another
// leader (Harness.Serving, asked every 50 ms), two TTLs past the last
// time it began to serve — an election later in the freeze starts the
// count again — up to five TTLs in all. It returns that time (from for a
// store without Serving; zero if it was not serving at the end; a time
// is taken before the store is asked, so a slow answer never shortens
// the window), whether it served at all, and the freeze's end.
func (s *suite) waitFreeze(t *testing.T, from time.Time) (served time.Time, ever bool, end time.Time) {
	least, most := from.Add(2*s.h.TTL), from.Add(5*s.h.TTL)
	if s.h.Serving == nil {
		time.Sleep(time.Until(least))
		return from, true, time.Now()
	}
	for {
		now := time.Now()
		settled := !served.IsZero() && !now.Before(least) && !now.Before(served.Add(2*s.h.TTL))
		if settled || !now.Before(most) {
			return served, ever, now
		}
		switch up := s.h.Serving(); {
		case up && served.IsZero():
			served, ever = now, true
		case !up && !served.IsZero():
			t.Logf("the store stopped serving %s into the freeze (an election)", now.Sub(from).Round(time.Millisecond))
			served = time.Time{}
		}
		time.Sleep(50 * time.Millisecond)
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
