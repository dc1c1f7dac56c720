package mysql_test

import (
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/mysqltest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/mysql"
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
	t.Cleanup(func() { _ = h.Release(ctxT(t)) })
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
	l, err := b.Acquire(ctxT(t), lease.Request{Key: key, TTL: time.Second, Owner: "taker"})
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

// TestKillDuringHold: SIGKILL of the server while a Hold renews: Done
// closes before the validity ends; after a restart the key is taken over
// only after that, with a higher fence, and a completed epoch is still
// refused.
func TestKillDuringHold(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	b, other := open(t, s.DSN()), open(t, s.DSN())
	ctx := ctxT(t)
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

// TestCommitsSurviveKill: a lease granted before SIGKILL is still held
// after the restart (InnoDB keeps acknowledged commits), and the fence
// keeps rising.
func TestCommitsSurviveKill(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	b, other := open(t, s.DSN()), open(t, s.DSN())
	l, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 30 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	_, err = try(t, other, lease.Request{Key: "job", TTL: time.Second})
	var re *lease.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, lease.ErrHeld) || re.Holder != "holder" {
		t.Fatalf("MUTUAL EXCLUSION VIOLATED after a crash: %v, want ErrHeld by holder", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	takeOver(t, other, "job", time.Time{}, l.Fence())
}

// TestPauseDuringHold: SIGSTOP of the server: calls
// return within the timeout instead of hanging, Done closes before the
// validity ends, and after SIGCONT the key is taken over only after it.
func TestPauseDuringHold(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	b, other := open(t, s.DSN()), open(t, s.DSN())
	l, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 3 * time.Second, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	vu := holdUntilLost(t, b, l, func() {
		s.Pause()
		start := time.Now()
		_, err := b.Inspect(ctxT(t), "job")
		if took := time.Since(start); err == nil || took > b.Timeout()+2*time.Second {
			t.Errorf("Inspect on a paused server: %v after %s, want an error within the timeout %s", err, took, b.Timeout())
		}
	})
	s.Resume()
	takeOver(t, other, "job", vu, l.Fence())
}

// TestProxyCut: a network cut between client and server: Done closes
// before the validity ends; once healed, the client reconnects.
func TestProxyCut(t *testing.T) {
	t.Parallel()
	s := mysqltest.Start(t)
	b, other := open(t, s.ProxiedDSN()), open(t, s.DSN())
	l, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vu := holdUntilLost(t, b, l, s.Proxy().Cut)
	s.Proxy().Heal()
	takeOver(t, other, "job", vu, l.Fence())
	if _, err := b.Inspect(ctxT(t), "job"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	s.Proxy().Blackhole(true)
	t.Cleanup(s.Proxy().Cut)
	start := time.Now()
	_, err = b.Inspect(ctxT(t), "job")
	var ne *lease.NodeError
	if !errors.As(err, &ne) || ne.Node != b.Servers()[0] {
		t.Fatalf("blackholed Inspect: %v, want a NodeError naming %s", err, b.Servers()[0])
	}
	t.Logf("blackholed Inspect failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestKillConnectionReconnects: after KILL CONNECTION of the client's
// sessions, the very next call succeeds on a fresh connection, and the
// lease is still held (Extend found its token).
func TestKillConnectionReconnects(t *testing.T) {
	t.Parallel()
	if err := killConnectionThenExtend(t); err != nil {
		t.Fatalf("first Extend after KILL CONNECTION: %v", err)
	}
}

// TestKillConnectionReconnectsNegative is its negative control: without
// the retry on a fresh connection the first call after the kill fails.
func TestKillConnectionReconnectsNegative(t *testing.T) {
	t.Parallel()
	if err := killConnectionThenExtend(t, mysql.WithoutReconnect()); err == nil {
		t.Fatal("negative control: Extend succeeded without the reconnect retry")
	}
}

func killConnectionThenExtend(t *testing.T, opts ...mysql.Option) error {
	s := mysqltest.Start(t)
	// A timeout that leaves room for a new connection's handshake on a
	// loaded machine under the race detector: what is tested is that the
	// next call reconnects, not how fast.
	b := open(t, s.DSN(), append([]mysql.Option{mysql.WithTimeout(5 * time.Second)}, opts...)...)
	l, err := b.Acquire(ctxT(t), lease.Request{Key: "job", TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.KillConnections(t); n < 1 {
		t.Fatalf("KillConnections ended %d connections", n)
	}
	err = l.Extend(ctxT(t), 0)
	if err2 := l.Extend(ctxT(t), 0); err2 != nil {
		t.Fatalf("second Extend after KILL CONNECTION: %v", err2)
	}
	return err
}
