package sqlleasetest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// holdUntilLost starts a Hold on l, lets it renew at least once, runs
// fault, and waits for Done. It asserts that Done closed (with ErrLost)
// before the lease's validity ended, and returns that validity end.
func holdUntilLost(t *testing.T, b lease.Backend, l lease.Lease, fault func()) time.Time {
	t.Helper()
	renewed := make(chan struct{}, 16)
	h := lease.NewHold(l, b.Timeout(), lease.ObserveRenew(func(e lease.RenewEvent) {
		if e.OK {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(func() { _ = h.Release(Ctx(t)) })
	select {
	case <-renewed:
	case <-h.Done():
		t.Fatalf("lost before the fault: %v", h.Err())
	case <-time.After(2 * l.TTL()):
		t.Fatal("no renewal within two TTLs")
	}
	fault()
	select {
	case <-h.Done():
	case <-time.After(2*l.TTL() + 10*time.Second):
		t.Fatal("Done did not close after the fault")
	}
	now, vu := time.Now(), l.ValidUntil()
	if !now.Before(vu) {
		t.Fatalf("Done closed %s after the validity ended", now.Sub(vu))
	}
	if !errors.Is(h.Err(), lease.ErrLost) {
		t.Fatalf("Hold.Err() = %v, want ErrLost", h.Err())
	}
	t.Logf("Done closed %s before the validity ended: %v", vu.Sub(now).Round(time.Millisecond), h.Err())
	return vu
}

// takeOver acquires key with b until it succeeds, and asserts it did not
// succeed before notBefore (the last holder's validity end) and that the
// new fence is above oldFence.
func takeOver(t *testing.T, b lease.Backend, key string, notBefore time.Time, oldFence int64) {
	t.Helper()
	l, err := b.Acquire(Ctx(t), lease.Request{Key: key, TTL: time.Second, Owner: "taker"})
	if err != nil {
		t.Fatalf("take over %s: %v", key, err)
	}
	if at := time.Now(); at.Before(notBefore) {
		t.Fatalf("MUTUAL EXCLUSION VIOLATED: %s taken %s before the last holder's validity ended", key, notBefore.Sub(at))
	}
	if l.Fence() <= oldFence {
		t.Fatalf("FENCE WENT BACK: %d after %d", l.Fence(), oldFence)
	}
}

// KillDuringHold: SIGKILL of the server while a Hold renews: Done closes
// before the validity ends; after a restart the key is taken over only
// after that, with a higher fence, and a completed epoch is still refused.
func KillDuringHold(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{}), s.Open(t, Client{})
	ctx := Ctx(t)
	done, err := b.Acquire(ctx, lease.Request{Key: "once", TTL: time.Second, Epoch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := done.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(ctx, lease.Request{Key: "job", TTL: 3 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	vu := holdUntilLost(t, b, l, s.Kill)
	s.Restart()
	if _, err := other.Acquire(ctx, lease.Request{Key: "once", TTL: time.Second, Epoch: 100}); !errors.Is(err, lease.ErrEpochDone) {
		t.Fatalf("completed epoch after restart: %v, want ErrEpochDone", err)
	}
	takeOver(t, other, "job", vu, l.Fence())
}

// CommitsSurviveKill: a lease granted before SIGKILL is still held after
// the restart (the server keeps acknowledged commits), and the fence
// keeps rising.
func CommitsSurviveKill(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{}), s.Open(t, Client{})
	l, err := b.Acquire(Ctx(t), lease.Request{Key: "job", TTL: 30 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	_, err = Try(t, other, lease.Request{Key: "job", TTL: time.Second})
	var re *lease.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, lease.ErrHeld) || re.Holder != "holder" {
		t.Fatalf("MUTUAL EXCLUSION VIOLATED after a crash: %v, want ErrHeld by holder", err)
	}
	if err := l.Release(Ctx(t)); err != nil {
		t.Fatal(err)
	}
	takeOver(t, other, "job", time.Time{}, l.Fence())
}

// PauseDuringHold: SIGSTOP of the server (and of its backends): calls
// return within the timeout instead of hanging, Done closes before the
// validity ends, and after SIGCONT the key is taken over only after it.
func PauseDuringHold(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{}), s.Open(t, Client{})
	l, err := b.Acquire(Ctx(t), lease.Request{Key: "job", TTL: 3 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	vu := holdUntilLost(t, b, l, func() {
		s.Pause()
		start := time.Now()
		_, err := b.Inspect(Ctx(t), "job")
		if took := time.Since(start); err == nil || took > b.Timeout()+2*time.Second {
			t.Errorf("Inspect on a paused server: %v after %s, want an error within the timeout %s", err, took, b.Timeout())
		}
	})
	s.Resume()
	takeOver(t, other, "job", vu, l.Fence())
}

// ProxyCut: a network cut between client and server: Done closes before
// the validity ends; once healed, the client reconnects; with the link
// silently dropping packets, a call fails with an error naming the
// server.
func ProxyCut(t *testing.T, h Harness) {
	t.Parallel()
	s := h.Start(t)
	b, other := s.Open(t, Client{Proxied: true}), s.Open(t, Client{})
	l, err := b.Acquire(Ctx(t), lease.Request{Key: "job", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vu := holdUntilLost(t, b, l, s.Proxy().Cut)
	s.Proxy().Heal()
	takeOver(t, other, "job", vu, l.Fence())
	if _, err := b.Inspect(Ctx(t), "job"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	s.Proxy().Blackhole(true)
	// A client may clean a timed-out connection up in the background (pgx
	// sends a cancel request, then drains, for up to 15 s) and Close waits
	// for that; cutting every connection at the end lets it finish at once.
	t.Cleanup(s.Proxy().Cut)
	start := time.Now()
	_, err = b.Inspect(Ctx(t), "job")
	var ne *lease.NodeError
	if !errors.As(err, &ne) || ne.Node != b.Servers()[0] {
		t.Fatalf("blackholed Inspect: %v, want a NodeError naming %s", err, b.Servers()[0])
	}
	t.Logf("blackholed Inspect failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// Reconnects: after the server ended the client's connections
// (DropConnections), the very next call succeeds on a fresh connection,
// and the lease is still held (Extend found its token).
func Reconnects(t *testing.T, h Harness) {
	t.Parallel()
	if err := dropThenExtend(t, h, Client{}); err != nil {
		t.Fatalf("first Extend after %s: %v", h.Drop, err)
	}
}

// ReconnectsNegative is the negative control of Reconnects: without the
// retry on a fresh connection the first call after the drop fails.
func ReconnectsNegative(t *testing.T, h Harness) {
	t.Parallel()
	if err := dropThenExtend(t, h, Client{NoReconnect: true}); err == nil {
		t.Fatal("negative control: Extend succeeded without the reconnect retry")
	}
}

// dropThenExtend takes a lease, has the server end the client's
// connections, and returns the error of the first Extend after that; the
// second must succeed.
func dropThenExtend(t *testing.T, h Harness, c Client) error {
	s := h.Start(t)
	// A timeout that leaves room for a new connection's handshake (SCRAM
	// on PostgreSQL) on a loaded machine under the race detector: what is
	// tested is that the next call reconnects, not how fast.
	c.Timeout = 5 * time.Second
	b := s.Open(t, c)
	l, err := b.Acquire(Ctx(t), lease.Request{Key: "job", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.DropConnections(t); n < 1 {
		t.Fatalf("%s ended %d connections", h.Drop, n)
	}
	err = l.Extend(Ctx(t), 0)
	if err2 := l.Extend(Ctx(t), 0); err2 != nil {
		t.Fatalf("second Extend after %s: %v", h.Drop, err2)
	}
	return err
}
