package zookeeper

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/leasetest"
)

// frozenTTL is the lease TTL and session timeout of the frozen-leader
// tests: the request timeout is a tenth of it, and go-zookeeper's own
// handshake wait 10 × two thirds of it.
const frozenTTL = 6 * time.Second

// TestFrozenLeaderClientsGoOn SIGSTOPs the ensemble's leader while four
// clients take a fresh key after another and each holds one key (two of
// them given all three servers, two only the leader and a follower and
// connected to the follower: see frozenClients). The
// other two servers elect another leader and serve (the followers notice
// after syncLimit ticks, then vote and synchronise: seconds on a loaded
// machine, in which no write is taken); the freeze lasts three TTLs, and
// at least two TTLs after they serve. From the moment they serve every
// client must take a key at least once per TTL (a daemon's ticks go on
// while a quorum is up), and no hold may be lost but one given up before
// then or within a client's failover after it, as the conformance
// suite's FrozenMinority holds every backend to; a hold lost before the
// freeze is an error.
func TestFrozenLeaderClientsGoOn(t *testing.T) {
	besideConformance(t)
	r := frozenLeaderScenario(t, nil)
	for i, g := range r.gaps {
		if g > frozenTTL {
			t.Errorf("client %d: no key taken for %s of the freeze once the others served (bound: the TTL, %s)", i, g.Round(time.Millisecond), frozenTTL)
		}
	}
	failover := 3 * r.timeout // a request timing out, a handshake elsewhere, the renewal
	for i, err := range r.lost {
		switch {
		case err == nil:
		case r.lostAt[i].Before(r.from):
			t.Errorf("client %d: hold lost before the freeze: %v", i, err)
		case r.lostAt[i].Before(r.served.Add(failover)):
			t.Logf("client %d: hold given up %s into the freeze, the others serving after %s (a client's failover: %s): %v",
				i, r.lostAt[i].Sub(r.from).Round(time.Millisecond), r.served.Sub(r.from).Round(time.Millisecond), failover, err)
		default:
			t.Errorf("client %d: hold lost %s after the others served: %v", i, r.lostAt[i].Sub(r.served).Round(time.Millisecond), err)
		}
	}
}

// TestNegativeControlUnboundedHandshake: clients that dial as
// go-zookeeper does by default reconnect to the frozen leader (its kernel
// still accepts connections) and wait there for a handshake that never
// comes — those connected to a follower that knows only the leader
// besides, at least, when the follower drops its clients to elect
// another leader: the check above sees a client stalled past the TTL
// while the others serve.
func TestNegativeControlUnboundedHandshake(t *testing.T) {
	besideConformance(t)
	r := frozenLeaderScenario(t, setUnboundedConnect)
	worst := time.Duration(0)
	for _, g := range r.gaps {
		worst = max(worst, g)
	}
	if worst <= frozenTTL {
		t.Errorf("the check found no stall: longest gap %s, within the TTL %s", worst.Round(time.Millisecond), frozenTTL)
	}
}

// frozenResult is when the leader froze and the other servers served
// (the last time they began to, during the freeze), the clients' request
// timeout, and per client the longest time from then to the freeze's end
// without a key taken, and the error of its hold and when it was given
// up if it was lost (nil: held).
type frozenResult struct {
	from, served time.Time
	timeout      time.Duration
	gaps         []time.Duration
	lost         []error
	lostAt       []time.Time
}

// frozenLeaderScenario runs the freeze with clients opened with setup.
func frozenLeaderScenario(t *testing.T, setup func(*Backend)) frozenResult {
	e := zktest.Start(t, 3)
	lead := e.WaitLeader(15 * time.Second)
	if lead < 0 {
		t.Fatal("no leader")
	}
	bs := frozenClients(t, e, lead, setup)
	clients := len(bs)
	var holds []*lease.Hold
	for i, b := range bs {
		h, _ := holdThrough(t, b, fmt.Sprintf("held-%d", i), frozenTTL)
		holds = append(holds, h)
		t.Logf("client %d on %s; leader %s", i, b.conn.Server(), e.Servers[lead].Addr())
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wins := make([][]time.Time, clients)
	for i, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wins[i], _ = leasetest.TakeFresh(ctx, b, fmt.Sprint("fresh-", i), frozenTTL)
		}()
	}
	watch := watchHolds(ctx, &wg, holds)
	r := frozenResult{timeout: bs[0].Timeout(), gaps: make([]time.Duration, clients)}
	e.Servers[lead].Pause()
	t.Cleanup(e.Servers[lead].Resume)
	r.from = time.Now()
	var to time.Time
	r.served, to = freezeUntilServed(t, e, r.from)
	r.lost, r.lostAt = watch(to)
	e.Servers[lead].Resume()
	stop()
	wg.Wait()
	if r.served.IsZero() {
		t.Fatalf("the other two servers were not serving at the end of the freeze (%s)", to.Sub(r.from).Round(time.Millisecond))
	}
	t.Logf("the others served %s after the leader froze; the freeze ended %s after that",
		r.served.Sub(r.from).Round(time.Millisecond), to.Sub(r.served).Round(time.Millisecond))
	for i, ws := range wins {
		r.gaps[i] = leasetest.LongestGap(ws, r.served, to)
		t.Logf("client %d: %d keys taken, longest gap once the others served %s", i, len(ws), r.gaps[i].Round(time.Millisecond))
	}
	return r
}

// frozenClients opens the scenario's four clients with setup: two given
// the three servers (go-zookeeper picks one at random), two given only
// the leader and a follower, and opened again until they are connected to
// the follower — when the leader freezes, the follower drops its clients
// to elect another leader, and the next server they try is the frozen one.
func frozenClients(t *testing.T, e *zktest.Ensemble, lead int, setup func(*Backend)) []*Backend {
	follower := e.Servers[(lead+1)%len(e.Servers)].Addr()
	var bs []*Backend
	for i := range 4 {
		servers := e.Addrs()
		if i%2 == 1 {
			servers = []string{e.Servers[lead].Addr(), follower}
		}
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			b, err := openWith(ctx, Config{Servers: servers, Root: "/lctest", Timeout: frozenTTL / 10, SessionTimeout: frozenTTL}, setup)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if len(servers) == 3 || b.conn.Server() == follower {
				t.Cleanup(func() { _ = b.Close() })
				bs = append(bs, b)
				break
			}
			_ = b.Close()
			if try == 20 {
				t.Fatalf("client %d: not connected to the follower %s in 20 tries", i, follower)
			}
		}
	}
	return bs
}

// freezeUntilServed waits out the freeze that began at from, watching
// whether the ensemble serves: at least three TTLs, and two TTLs after the
// last time it began to serve (up to five TTLs in all). It returns that
// time (zero: it never served; a time is taken before the servers are
// asked, so an answer slow to come never shortens the window) and the
// freeze's end.
func freezeUntilServed(t *testing.T, e *zktest.Ensemble, from time.Time) (served, end time.Time) {
	least, most := from.Add(3*frozenTTL), from.Add(5*frozenTTL)
	for {
		now := time.Now()
		long := !now.Before(least) && !served.IsZero() && !now.Before(served.Add(2*frozenTTL))
		if long || !now.Before(most) {
			return served, now
		}
		switch up := e.Serving(); {
		case up && served.IsZero():
			served = now
		case !up && !served.IsZero():
			t.Logf("the others stopped serving %s into the freeze", now.Sub(from).Round(time.Millisecond))
			served = time.Time{}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchHolds watches holds until ctx ends; the returned function, called
// at the freeze's end, gives each hold's error and when it was given up,
// for those given up by then (a hold seen done only then counts as given
// up then).
func watchHolds(ctx context.Context, wg *sync.WaitGroup, holds []*lease.Hold) func(at time.Time) ([]error, []time.Time) {
	var mu sync.Mutex
	lostAt := make([]time.Time, len(holds))
	for i, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-h.Done():
				mu.Lock()
				lostAt[i] = time.Now()
				mu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	return func(at time.Time) ([]error, []time.Time) {
		mu.Lock()
		defer mu.Unlock()
		errs, when := make([]error, len(holds)), make([]time.Time, len(holds))
		for i, h := range holds {
			select {
			case <-h.Done():
				errs[i], when[i] = h.Err(), cmp.Or(lostAt[i], at)
			default:
			}
		}
		return errs, when
	}
}
