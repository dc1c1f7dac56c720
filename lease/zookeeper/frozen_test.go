package zookeeper

import (
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

// TestFrozenLeaderClientsGoOn SIGSTOPs the ensemble's leader for three
// TTLs while four clients take a fresh key after another and each holds
// one key. The other two servers elect another leader and serve (the
// followers notice after syncLimit ticks, then vote and synchronise:
// seconds on a loaded machine, in which no write is taken), so from the
// moment they serve every client must take a key at least once per TTL
// (a daemon's ticks go on while a quorum is up), and no hold may be lost
// but one given up before then or within a client's failover after it,
// as the conformance suite's FrozenMinority holds every backend to.
func TestFrozenLeaderClientsGoOn(t *testing.T) {
	r := frozenLeaderScenario(t, nil)
	if r.served.IsZero() {
		t.Fatal("the other two servers never served during the freeze")
	}
	for i, g := range r.gaps {
		if g > frozenTTL {
			t.Errorf("client %d: no key taken for %s of the freeze once the others served (bound: the TTL, %s)", i, g.Round(time.Millisecond), frozenTTL)
		}
	}
	failover := 3 * (frozenTTL / 10) // a request timing out, a handshake elsewhere, the renewal
	for i, err := range r.lost {
		switch {
		case err == nil:
		case r.lostAt[i].Before(r.served.Add(failover)):
			t.Logf("client %d: hold given up %s after the others served (within a client's failover, %s): %v",
				i, r.lostAt[i].Sub(r.served).Round(time.Millisecond), failover, err)
		default:
			t.Errorf("client %d: hold lost %s after the others served: %v", i, r.lostAt[i].Sub(r.served).Round(time.Millisecond), err)
		}
	}
}

// TestNegativeControlUnboundedHandshake: clients that dial as
// go-zookeeper does by default reconnect to the frozen leader (its kernel
// still accepts connections) and wait there for a handshake that never
// comes: the check above sees a client stalled past the TTL while the
// others serve.
func TestNegativeControlUnboundedHandshake(t *testing.T) {
	r := frozenLeaderScenario(t, setUnboundedConnect)
	worst := time.Duration(0)
	for _, g := range r.gaps {
		worst = max(worst, g)
	}
	if worst <= frozenTTL {
		t.Errorf("the check found no stall: longest gap %s, within the TTL %s", worst.Round(time.Millisecond), frozenTTL)
	}
}

// frozenResult is when the other servers served again during the
// freeze (zero: never) and, per client, the longest time of the freeze
// from then without a key taken, and the error of its hold and when it
// was given up if it was lost (nil: held).
type frozenResult struct {
	served time.Time
	gaps   []time.Duration
	lost   []error
	lostAt []time.Time
}

// frozenLeaderScenario runs the freeze with clients opened with setup.
func frozenLeaderScenario(t *testing.T, setup func(*Backend)) frozenResult {
	e := zktest.Start(t, 3)
	const clients = 4
	var bs []*Backend
	var holds []*lease.Hold
	for i := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := openWith(ctx, Config{Servers: e.Addrs(), Root: "/lctest", Timeout: frozenTTL / 10, SessionTimeout: frozenTTL}, setup)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		bs = append(bs, b)
		h, _ := holdThrough(t, b, fmt.Sprintf("held-%d", i), frozenTTL)
		holds = append(holds, h)
	}
	lead := e.WaitLeader(15 * time.Second)
	if lead < 0 {
		t.Fatal("no leader")
	}
	for i, b := range bs {
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
	r := frozenResult{gaps: make([]time.Duration, clients), lost: make([]error, clients), lostAt: make([]time.Time, clients)}
	lostAt := make([]time.Time, clients)
	var mu sync.Mutex
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
	e.Servers[lead].Pause()
	t.Cleanup(e.Servers[lead].Resume)
	from := time.Now()
	end := from.Add(3 * frozenTTL) // the freeze: the clients work meanwhile
	for r.served.IsZero() && time.Now().Before(end) {
		if e.Serving() {
			r.served = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(end))
	to := time.Now()
	mu.Lock()
	for i, h := range holds {
		if !lostAt[i].IsZero() {
			r.lost[i], r.lostAt[i] = h.Err(), lostAt[i]
		}
	}
	mu.Unlock()
	e.Servers[lead].Resume()
	stop()
	wg.Wait()
	t.Logf("the others served %s after the leader froze", r.served.Sub(from).Round(time.Millisecond))
	for i, ws := range wins {
		if !r.served.IsZero() {
			r.gaps[i] = leasetest.LongestGap(ws, r.served, to)
		}
		t.Logf("client %d: %d keys taken, longest gap once the others served %s", i, len(ws), r.gaps[i].Round(time.Millisecond))
	}
	return r
}
