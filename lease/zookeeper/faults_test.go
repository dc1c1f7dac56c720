package zookeeper

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/netproxy"
	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
)

// validityLog records a Hold's validity as its renewals move it, and when
// its Done closed.
type validityLog struct {
	mu    sync.Mutex
	valid time.Time
}

func (v *validityLog) set(t time.Time) { v.mu.Lock(); v.valid = t; v.mu.Unlock() }
func (v *validityLog) get() time.Time  { v.mu.Lock(); defer v.mu.Unlock(); return v.valid }

// holdThrough acquires key on a, holds it, and returns the hold and its
// validity log.
func holdThrough(t *testing.T, a *Backend, key string, ttl time.Duration) (*lease.Hold, *validityLog) {
	t.Helper()
	l, err := a.Acquire(ctxT(t, 20*time.Second), lease.Request{Key: key, TTL: ttl, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	vl := &validityLog{}
	h := lease.NewHold(l, a.Timeout(), lease.OnRenew(vl.set))
	t.Cleanup(func() { _ = h.Release(ctxT(t, 5*time.Second)) })
	return h, vl
}

// takeOver has b try key until it wins (or until `within`), and returns
// when it won.
func takeOver(t *testing.T, b *Backend, key string, ttl time.Duration, within time.Duration) (time.Time, bool) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		res := b.TryAcquireBatch(ctxT(t, 5*time.Second), []lease.Request{{Key: key, TTL: ttl, Owner: "b"}})
		if res[0].Err == nil {
			return time.Now(), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Time{}, false
}

// TestPartitionPastSessionTimeout cuts a holder from the whole ensemble
// (a proxy per server swallows its traffic) past its session timeout. Its
// Hold must report the loss before its validity ends; another client takes
// the lock over only after that validity ended (the server expired the
// session) — never while the first one could still believe it holds.
func TestPartitionPastSessionTimeout(t *testing.T) {
	besideConformance(t)
	won, last := partitionScenario(t, 0)
	if won.Before(last) {
		t.Errorf("another client won at %s, before the holder's validity ended at %s",
			won.Format("15:04:05.000"), last.Format("15:04:05.000"))
	}
}

// TestNegativeControlValidityPastSession: a holder that counts its
// validity as 3 session timeouts (ignoring that the server expires its
// session after one) is taken over while it still believes it holds —
// the check above catches that.
func TestNegativeControlValidityPastSession(t *testing.T) {
	besideConformance(t)
	won, last := partitionScenario(t, 6*time.Second)
	if !won.Before(last) {
		t.Errorf("the check found no overlap: taken over at %s, holder valid until %s",
			won.Format("15:04:05.000"), last.Format("15:04:05.000"))
	}
}

// partitionScenario runs the partition and returns when the other client
// won and until when the holder believed its lock valid.
func partitionScenario(t *testing.T, unsafeSpan time.Duration) (won, last time.Time) {
	e := zktest.Start(t, 3)
	var proxies []*netproxy.Proxy
	var via []string
	for _, s := range e.Addrs() {
		p := netproxy.New(t, s)
		proxies = append(proxies, p)
		via = append(via, p.Addr())
	}
	const ttl = 2 * time.Second
	a, b := open(t, via, ttl), open(t, e.Addrs(), ttl)
	setUnsafeSpan(a, unsafeSpan)
	h, vl := holdThrough(t, a, "cut", ttl)
	time.Sleep(ttl / 2) // a renewal or two
	for _, p := range proxies {
		p.Blackhole(true)
	}
	cutAt := time.Now()
	won, ok := takeOver(t, b, "cut", ttl, 4*ttl)
	if !ok {
		t.Fatalf("no takeover within %s of the cut", 4*ttl)
	}
	last = vl.get()
	if unsafeSpan == 0 {
		select {
		case <-h.Done():
		default:
			t.Fatal("the holder's Hold did not report the loss")
		}
		if !errors.Is(h.Err(), lease.ErrLost) {
			t.Errorf("hold error %v, want ErrLost", h.Err())
		}
	}
	t.Logf("cut at +0; holder valid until +%s; taken over at +%s", last.Sub(cutAt).Round(time.Millisecond), won.Sub(cutAt).Round(time.Millisecond))
	for _, p := range proxies {
		p.Blackhole(false)
	}
	// The old holder's session expired: its lock is not its own any more.
	if err := h.Lease().Extend(ctxT(t, 10*time.Second), 0); !errors.Is(err, lease.ErrNotHeld) && !errors.Is(err, lease.ErrNoQuorum) {
		t.Errorf("extend after expiry: %v", err)
	}
	return won, last
}

// TestHoldDoneBeforeValidityOnPause pauses every server: the Hold reports
// the loss before its validity ends.
func TestHoldDoneBeforeValidityOnPause(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 1)
	const ttl = 2 * time.Second
	a := open(t, e.Addrs(), ttl)
	h, vl := holdThrough(t, a, "paused", ttl)
	time.Sleep(ttl / 2)
	e.Servers[0].Pause()
	t.Cleanup(e.Servers[0].Resume)
	select {
	case <-h.Done():
	case <-time.After(3 * ttl):
		t.Fatal("no loss reported while the server was paused")
	}
	doneAt, last := time.Now(), vl.get()
	if !doneAt.Before(last) {
		t.Errorf("Done closed at %s, after the validity ended at %s", doneAt.Format("15:04:05.000"), last.Format("15:04:05.000"))
	}
	e.Servers[0].Resume()
}

// TestKillLeader kills the ensemble's leader while a lease is held: the
// lease survives the election, or its loss is reported before its
// validity ends; a second client never holds it meanwhile.
func TestKillLeader(t *testing.T) {
	besideConformance(t)
	e := zktest.Start(t, 3)
	const ttl = 3 * time.Second
	a, b := open(t, e.Addrs(), ttl), open(t, e.Addrs(), ttl)
	h, vl := holdThrough(t, a, "leader", ttl)
	lead := e.WaitLeader(15 * time.Second)
	if lead < 0 {
		t.Fatal("no leader")
	}
	e.Servers[lead].Kill()
	end := time.Now().Add(2 * ttl)
	for time.Now().Before(end) {
		res := b.TryAcquireBatch(ctxT(t, 5*time.Second), []lease.Request{{Key: "leader", TTL: ttl, Owner: "b"}})
		if res[0].Err == nil {
			if now := time.Now(); now.Before(vl.get()) {
				t.Fatalf("b acquired at %s while a was valid until %s", now.Format("15:04:05.000"), vl.get().Format("15:04:05.000"))
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-h.Done():
		t.Logf("hold lost over the election: %v", h.Err())
	default:
		if time.Until(vl.get()) <= 0 {
			t.Error("hold neither renewed nor reported lost")
		}
	}
	e.Servers[lead].Restart()
}
