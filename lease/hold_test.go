package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestHoldStopLetsLeaseLapse: Stop ends renewing without releasing, so the
// lease stays its holder's until ValidUntil (another client is refused)
// and is free afterwards.
func TestHoldStopLetsLeaseLapse(t *testing.T) {
	node := redistest.Start(t, 1) // fresh: restart detection would keep it from voting for a TTL
	open := func() lease.Backend {
		b, err := redlock.Open(context.Background(), redlock.Config{Nodes: node.URLs(), Prefix: "holdstop", Options: []redlock.Option{redlock.WithTimeout(time.Second), redlock.WithoutRestartDetection()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	a, b := open(), open()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := a.Acquire(ctx, lease.Request{Key: "k", TTL: 2 * time.Second, Owner: "a"})
	if err != nil {
		t.Fatal(err)
	}
	h := lease.NewHold(l, a.Timeout(), lease.RenewEvery(200*time.Millisecond))
	time.Sleep(500 * time.Millisecond) // a renewal or two
	h.Stop()
	h.Stop() // safe twice
	select {
	case <-h.Done():
	default:
		t.Fatal("Done still open after Stop")
	}
	if h.Err() != nil {
		t.Errorf("Err after Stop: %v", h.Err())
	}
	valid := l.ValidUntil()
	if !time.Now().Before(valid) {
		t.Fatalf("validity already over after Stop: %s", valid)
	}
	for time.Now().Before(valid.Add(-100 * time.Millisecond)) {
		res := b.TryAcquireBatch(ctx, []lease.Request{{Key: "k", TTL: time.Second, Owner: "b"}})
		if !errors.Is(res[0].Err, lease.ErrHeld) {
			t.Fatalf("another client, %s before the stopped lease's validity ended: %v", time.Until(valid), res[0].Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(valid) + 300*time.Millisecond)
	if _, err := b.Acquire(ctx, lease.Request{Key: "k", TTL: time.Second, Owner: "b"}); err != nil {
		t.Errorf("the stopped lease did not run out: %v", err)
	}
}
