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
// (Harness.Serving) is held to that in each stretch in which it served: a
// hold given up between stretches, or within three request timeouts of a
// stretch's start (a client on the frozen server leaving it), is logged,
// and the clients must take a key within a TTL of the start. A backend
// with fewer than three servers has no minority to freeze; the test then
// only logs so.
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
	served, to := s.waitFreeze(t, from) // the clients work meanwhile
	// A client whose session is on the frozen server renews only once it
	// left it: a request there times out, a handshake elsewhere, then the
	// renewal — three request timeouts after the store serves again.
	failover := 3 * bs[0].Timeout()
	checkServed(t, s.h.TTL, served, from, to)
	for _, w := range holds {
		checkHold(t, w, served, failover, from)
	}
	stop()
	wg.Wait()
	f.heal()
	for c, ws := range wins {
		var gap time.Duration
		for _, st := range served {
			gap = max(gap, LongestGap(ws, st.from, st.to))
		}
		t.Logf("client %d: %d keys taken while server %d was frozen, longest gap while the store served %s", c, len(ws), i, gap.Round(time.Millisecond))
		if gap > s.h.TTL {
			t.Errorf("client %d took no key for %s while server %d was frozen and the others had a quorum serving (bound: the TTL, %s); last refusal: %v",
				c, gap.Round(time.Millisecond), i, s.h.TTL, errs[c])
		}
	}
}

// stretch is a time the store served without a break, as far as
// Harness.Serving saw: from the first answer that it serves coming back
// to the asking of the last one before an answer that it does not (or to
// the freeze's end).
type stretch struct{ from, to time.Time }

// checkServed fails the test when the store never served, or never long
// enough for the clients' bound to be checked (a TTL), in a freeze of a
// minority, and logs when it did.
func checkServed(t *testing.T, ttl time.Duration, served []stretch, from, to time.Time) {
	t.Helper()
	long := false
	for _, st := range served {
		if st.from.After(from) || st.to.Before(to) {
			t.Logf("the store served from %s to %s into the freeze", st.from.Sub(from).Round(time.Millisecond), st.to.Sub(from).Round(time.Millisecond))
		}
		long = long || st.to.Sub(st.from) > ttl
	}
	switch {
	case len(served) == 0:
		t.Errorf("the store took no write for the whole freeze (%s) although the others had a quorum", to.Sub(from).Round(time.Millisecond))
	case !long:
		t.Errorf("the store never served for a TTL (%s) in a row in a freeze of %s although the others had a quorum", ttl, to.Sub(from).Round(time.Millisecond))
	}
}

// checkHold fails the test when w's hold was given up while the store
// served, past a client's failover from the stretch's start, and logs it
// when it was given up at another time (the store's own outage).
func checkHold(t *testing.T, w *watchedHold, served []stretch, failover time.Duration, from time.Time) {
	t.Helper()
	select {
	case <-w.closed:
	default:
		return
	}
	w.mu.Lock()
	lostAt := w.doneAt
	w.mu.Unlock()
	for _, st := range served {
		if !lostAt.Before(st.from.Add(failover)) && !lostAt.After(st.to) {
			t.Errorf("%s lost %s into the freeze, while the store served (from %s): %v",
				w.name, lostAt.Sub(from).Round(time.Millisecond), st.from.Sub(from).Round(time.Millisecond), w.h.Err())
			return
		}
	}
	t.Logf("%s given up %s into the freeze, while the store did not serve or within a client's failover (%s) of its serving again: %v",
		w.name, lostAt.Sub(from).Round(time.Millisecond), failover, w.h.Err())
}

// servingPoll is the pause between two questions to Harness.Serving.
const servingPoll = 100 * time.Millisecond

// waitFreeze waits out the freeze that began at from and returns the
// stretches the store served in it and the freeze's end. The freeze lasts
// two TTLs; for a store that takes no write until its servers have
// elected another leader (Harness.Serving, asked again servingPoll after
// each answer), also two TTLs past the start of the last stretch — an
// election later in the freeze starts the count again — and up to five
// TTLs in all. A store without Serving serves throughout.
func (s *suite) waitFreeze(t *testing.T, from time.Time) (served []stretch, end time.Time) {
	least, most := from.Add(2*s.h.TTL), from.Add(5*s.h.TTL)
	if s.h.Serving == nil {
		time.Sleep(time.Until(least))
		end = time.Now()
		return []stretch{{from, end}}, end
	}
	var open *stretch // the stretch under way; nil while the store does not serve
	for {
		asked := time.Now()
		settled := open != nil && !asked.Before(least) && !asked.Before(open.from.Add(2*s.h.TTL))
		if settled || !asked.Before(most) {
			if open != nil {
				served = append(served, stretch{open.from, asked})
			}
			return served, asked
		}
		up := s.h.Serving()
		switch {
		case up && open == nil:
			now := time.Now()
			open = &stretch{now, now}
		case up:
			open.to = asked
		case open != nil:
			served = append(served, *open)
			t.Logf("the store stopped serving %s into the freeze (an election)", asked.Sub(from).Round(time.Millisecond))
			open = nil
		}
		time.Sleep(servingPoll)
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
