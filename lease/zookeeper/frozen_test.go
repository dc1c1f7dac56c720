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
// one key. The other two servers keep a quorum, so every client must take
// a key at least once per TTL throughout the freeze (a daemon's ticks go
// on), and no hold is lost.
func TestFrozenLeaderClientsGoOn(t *testing.T) {
	r := frozenLeaderScenario(t, nil)
	for i, g := range r.gaps {
		if g > frozenTTL {
			t.Errorf("client %d: no key taken for %s of the freeze (bound: the TTL, %s)", i, g.Round(time.Millisecond), frozenTTL)
		}
	}
	for i, err := range r.lost {
		if err != nil {
			t.Errorf("client %d: hold lost during the freeze: %v", i, err)
		}
	}
}

// TestNegativeControlUnboundedHandshake: clients that dial as
// go-zookeeper does by default reconnect to the frozen leader (its kernel
// still accepts connections) and wait there for a handshake that never
// comes: the check above sees a client stalled past the TTL.
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

// frozenResult is, per client, the longest time of the freeze without a
// key taken, and the error of its hold if it was lost (nil: held).
type frozenResult struct {
	gaps []time.Duration
	lost []error
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
	e.Servers[lead].Pause()
	t.Cleanup(e.Servers[lead].Resume)
	from := time.Now()
	time.Sleep(3 * frozenTTL) // the freeze: the clients work meanwhile
	to := time.Now()
	r := frozenResult{gaps: make([]time.Duration, clients), lost: make([]error, clients)}
	for i, h := range holds {
		select {
		case <-h.Done():
			r.lost[i] = h.Err()
		default:
		}
	}
	e.Servers[lead].Resume()
	stop()
	wg.Wait()
	for i, ws := range wins {
		r.gaps[i] = leasetest.LongestGap(ws, from, to)
		t.Logf("client %d: %d keys taken, longest gap %s", i, len(ws), r.gaps[i].Round(time.Millisecond))
	}
	return r
}
