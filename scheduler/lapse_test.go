package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/zktest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/zookeeper"
)

// lapseTTL is the lease TTL (and ZooKeeper session timeout) of the
// close-after-lapse test: long enough that, on a loaded machine, another
// client's acquisition right after an early Close lands well inside it.
const lapseTTL = 6 * time.Second

// TestCloseWaitsForLapsedLease: a lease left to run out (its job's
// processes could not be confirmed dead: finish with lapse) keeps its key
// until its validity ends, also when the daemon stops right then: Close
// waits for that validity before it closes the backend. The backend is
// ZooKeeper, whose Close ends the session and so deletes the ephemeral
// lock at once; another client trying the key all along must not get it
// before the lapsed lease's ValidUntil. Negative control: with the wait
// switched off the other client gets the key before that instant.
func TestCloseWaitsForLapsedLease(t *testing.T) {
	t.Parallel()
	e := zktest.Start(t, 1)
	t.Run("wait", func(t *testing.T) {
		grantedAt, vu := closeAfterLapse(t, e.Addrs(), false)
		t.Logf("B acquired the key at the lapsed validity's end %+v", grantedAt.Sub(vu).Round(time.Millisecond))
		if grantedAt.Before(vu) {
			t.Errorf("another client acquired the key %s before the lapsed lease's validity ended", vu.Sub(grantedAt).Round(time.Millisecond))
		}
	})
	t.Run("negative control: no wait", func(t *testing.T) {
		grantedAt, vu := closeAfterLapse(t, e.Addrs(), true)
		t.Logf("B acquired the key at the lapsed validity's end %+v", grantedAt.Sub(vu).Round(time.Millisecond))
		if !grantedAt.Before(vu) {
			t.Errorf("without the wait, the other client acquired the key only %s after the lapsed lease's validity: the test does not see an early Close", grantedAt.Sub(vu).Round(time.Millisecond))
		}
	})
}

// closeAfterLapse lets a scheduler on ZooKeeper leave a renewed lease to
// run out, closes the scheduler (noWait: without waiting for the lapse)
// while another client tries the key, and returns when that client's
// first grant returned and the lapsed lease's ValidUntil.
func closeAfterLapse(t *testing.T, servers []string, noWait bool) (grantedAt, validUntil time.Time) {
	j := &Job{Name: "lapsing", Schedule: "@hourly", Shell: "true", Deadline: time.Hour}
	cfg := tickConfig(t, nil, j)
	cfg.Lease.TTL, cfg.Lease.Renew = lapseTTL, lapseTTL/4
	beA := openZK(t, servers)
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: beA})
	if err != nil {
		t.Fatal(err)
	}
	s.setTestHooks(func(h *testHooks) { h.noLapseWait = noWait })
	beB := openZK(t, servers)
	req := lease.Request{Key: s.key(j.Name), TTL: lapseTTL, Owner: "A"}
	l, err := beA.Acquire(ctxFor(t, 30*time.Second), req)
	if err != nil {
		t.Fatal(err)
	}
	hold := lease.NewHold(l, beA.Timeout())
	now := time.Now()
	rec := RunRecord{Job: j.Name, Host: s.host, Start: now, End: now, Result: "aborted", Fence: l.Fence()}
	s.finish(j, l, hold, rec, false, true, s.log)
	validUntil = l.ValidUntil()
	if time.Until(validUntil) < lapseTTL/3 {
		t.Fatalf("the lapsed lease has only %s of validity left: too little to tell an early Close", time.Until(validUntil))
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	reqB := lease.Request{Key: req.Key, TTL: lapseTTL, Owner: "B"}
	for deadline := validUntil.Add(30 * time.Second); ; {
		res := beB.TryAcquireBatch(ctxFor(t, 10*time.Second), []lease.Request{reqB})
		if res[0].Err == nil {
			grantedAt = time.Now()
			_ = res[0].Lease.Release(ctxFor(t, 5*time.Second))
			break
		}
		if !errors.Is(res[0].Err, lease.ErrNotObtained) || time.Now().After(deadline) {
			t.Fatalf("B's acquisition: %v", res[0].Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	return grantedAt, validUntil
}

// openZK opens a ZooKeeper backend with a session as long as lapseTTL;
// t.Cleanup closes it.
func openZK(t *testing.T, servers []string) *zookeeper.Backend {
	t.Helper()
	b, err := zookeeper.Open(ctxFor(t, 30*time.Second), zookeeper.Config{Servers: servers, Root: "/lapse", SessionTimeout: lapseTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}
