package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// validityLog records the validity ends reported by OnRenew.
type validityLog struct {
	mu  sync.Mutex
	all []time.Time
}

func (v *validityLog) add(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.all = append(v.all, t)
}

func (v *validityLog) last() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.all[len(v.all)-1]
}

func (v *validityLog) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.all)
}

func TestHoldRenews(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs(), redlock.WithTimeout(500*time.Millisecond))
	k := key(t)
	ttl := 3 * time.Second
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: ttl, Owner: "a"})
	first := l.ValidUntil()
	var vl validityLog
	h := c.Hold(l, lease.OnRenew(vl.add)) // renews every TTL/3
	if h.Lease() != l {
		t.Error("Hold.Lease() is not the lease")
	}
	// Run past the validity of the acquisition.
	time.Sleep(time.Until(first.Add(500 * time.Millisecond)))
	select {
	case <-h.Done():
		t.Fatalf("Done closed while renewing: %v", h.Err())
	default:
	}
	if h.Err() != nil || h.Ctx().Err() != nil {
		t.Errorf("Err %v, Ctx.Err %v while held", h.Err(), h.Ctx().Err())
	}
	if !h.ValidUntil().After(time.Now()) {
		t.Errorf("held lease not valid: ValidUntil %s", h.ValidUntil())
	}
	vl.mu.Lock()
	all := append([]time.Time(nil), vl.all...)
	vl.mu.Unlock()
	// OnRenew is called at once with the current validity, then after
	// every renewal.
	if len(all) < 3 || !all[0].Equal(first) {
		t.Fatalf("OnRenew calls %v, want the acquired validity %s and at least two renewals", all, first)
	}
	if last := all[len(all)-1]; !last.After(first) || !last.Equal(h.ValidUntil()) {
		t.Errorf("last OnRenew %s, first %s, ValidUntil %s", last, first, h.ValidUntil())
	}
	// Another client cannot take it while it is held.
	other := votingClient(t, cl.URLs())
	_, err := other.Acquire(context.Background(), lease.Request{Key: k, TTL: ttl})
	refused(t, err, lease.ErrHeld)

	// Release twice is safe; Done closes with a nil Err.
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Errorf("second Release: %v", err)
	}
	select {
	case <-h.Done():
	default:
		t.Error("Done not closed after Release")
	}
	if h.Err() != nil || h.Ctx().Err() == nil {
		t.Errorf("after Release: Err %v, Ctx.Err %v", h.Err(), h.Ctx().Err())
	}
	if _, err := other.Acquire(context.Background(), lease.Request{Key: k, TTL: ttl}); err != nil {
		t.Errorf("acquire after Hold.Release: %v", err)
	}
}

func TestHoldMaxLifetime(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: 3 * time.Second})
	h := c.Hold(l, lease.MaxLifetime(300*time.Millisecond), lease.RenewEvery(100*time.Millisecond))
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not close after MaxLifetime")
	}
	if !errors.Is(h.Err(), lease.ErrMaxLifetime) || errors.Is(h.Err(), lease.ErrLost) {
		t.Errorf("Err = %v, want ErrMaxLifetime", h.Err())
	}
	if h.Ctx().Err() == nil {
		t.Error("Ctx not cancelled")
	}
	// The lease itself stays valid until its current validity ends.
	if !l.ValidUntil().After(time.Now()) {
		t.Error("lease not valid right after MaxLifetime")
	}
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Error(err)
	}
	if !errors.Is(h.Err(), lease.ErrMaxLifetime) {
		t.Errorf("Release replaced Err: %v", h.Err())
	}
}

// TestHoldLostBeforeValidity kills a majority of the nodes under an active
// Hold: Done must close, with Err wrapping ErrLost, before the validity the
// Hold last reported through OnRenew ends. Done closes safety margin +
// per-node timeout (500 + 200 ms here) before the validity ends: that is
// the tolerance for observing it late on a loaded machine.
func TestHoldLostBeforeValidity(t *testing.T) {
	t.Parallel()
	for _, n := range sizes {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			t.Parallel()
			cl := start(t, n)
			c := votingClient(t, cl.URLs(), redlock.WithTimeout(200*time.Millisecond))
			ttl := 3 * time.Second
			l := mustAcquire(t, c, lease.Request{Key: key(t), TTL: ttl})
			var vl validityLog
			h := c.Hold(l, lease.OnRenew(vl.add), lease.SafetyMargin(500*time.Millisecond))
			defer h.Release(context.Background())
			// Let it renew first.
			if !waitFor(10*time.Second, func() bool { return vl.count() >= 2 }) {
				t.Fatalf("only %d renewals", vl.count())
			}
			for i := 0; i < n/2+1; i++ {
				cl.Nodes[i].Kill()
			}
			select {
			case <-h.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("Done did not close after a majority died")
			}
			now := time.Now()
			validUntil := vl.last()
			if !now.Before(validUntil) {
				t.Fatalf("Done observed %s after the validity ended (%v)", now.Sub(validUntil), h.Err())
			}
			t.Logf("Done observed %s before the validity ended", validUntil.Sub(now).Round(time.Millisecond))
			if !errors.Is(h.Err(), lease.ErrLost) {
				t.Errorf("Err = %v, want ErrLost", h.Err())
			}
			if h.Ctx().Err() == nil {
				t.Error("Ctx not cancelled")
			}
			if !validUntil.Equal(h.ValidUntil()) {
				t.Errorf("last OnRenew %s, ValidUntil %s", validUntil, h.ValidUntil())
			}
		})
	}
}

// TestHoldLostToTakeover: when the lease is taken away (here: another
// owner's lock put on every node, as after an undetected restart and a
// takeover), renewals are refused and the Hold reports the loss before its
// validity ends. (A lock that merely vanished is taken again by the next
// renewal while the lease is valid: see TestExtendSpreads.)
func TestHoldLostToTakeover(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs(), redlock.WithTimeout(200*time.Millisecond))
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 2 * time.Second})
	var vl validityLog
	h := c.Hold(l, lease.OnRenew(vl.add), lease.RenewEvery(100*time.Millisecond), lease.SafetyMargin(500*time.Millisecond))
	defer h.Release(context.Background())
	waitFor(5*time.Second, func() bool { return vl.count() >= 2 })
	for _, nd := range cl.Nodes {
		setLock(t, nd, k, "intruder", 10*time.Second)
	}
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done did not close")
	}
	if now, vu := time.Now(), vl.last(); !now.Before(vu) {
		t.Fatalf("Done observed %s after validity", now.Sub(vu))
	}
	if !errors.Is(h.Err(), lease.ErrLost) || !strings.Contains(h.Err().Error(), "not held") {
		t.Errorf("Err = %v, want ErrLost saying the lease is not held", h.Err())
	}
}

func TestHoldComplete(t *testing.T) {
	t.Parallel()
	cl := start(t, 3)
	c := votingClient(t, cl.URLs())
	k := key(t)
	l := mustAcquire(t, c, lease.Request{Key: k, TTL: 5 * time.Second, Epoch: 10})
	h := c.Hold(l)
	if err := h.Complete(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
	if h.Err() != nil {
		t.Errorf("Err after Complete = %v", h.Err())
	}
	_, err := c.Acquire(context.Background(), lease.Request{Key: k, TTL: time.Second, Epoch: 10})
	refused(t, err, lease.ErrEpochDone)
}
