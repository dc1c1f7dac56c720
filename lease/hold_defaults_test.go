package lease

import (
	"context"
	"testing"
	"time"
)

// farLease is a Lease whose validity is an hour away, so a Hold on it only
// waits; it lets the defaults be read without a server (no Extend is ever
// sent).
type farLease struct{ ttl time.Duration }

func (f farLease) Key() string           { return "k" }
func (f farLease) Owner() string         { return "" }
func (f farLease) Token() string         { return "" }
func (f farLease) Epoch() int64          { return 0 }
func (f farLease) TTL() time.Duration    { return f.ttl }
func (f farLease) Fence() int64          { return 0 }
func (f farLease) ValidUntil() time.Time { return time.Now().Add(time.Hour) }
func (f farLease) Extend(context.Context, time.Duration) error {
	panic("extend: the hold should only wait")
}
func (f farLease) Release(context.Context) error  { return nil }
func (f farLease) Complete(context.Context) error { return nil }

// TestHoldDefaults pins RenewEvery = TTL/3 and the safety margin
// (2 × timeout + 5 ms, at most TTL/10), as their doc comments say.
func TestHoldDefaults(t *testing.T) {
	for _, tc := range []struct {
		ttl           time.Duration
		every, margin time.Duration
	}{
		{30 * time.Second, 10 * time.Second, 105 * time.Millisecond},
		{3 * time.Second, time.Second, 105 * time.Millisecond},
		{600 * time.Millisecond, 200 * time.Millisecond, 60 * time.Millisecond},
	} {
		h := NewHold(farLease{tc.ttl}, 50*time.Millisecond)
		if h.o.every != tc.every || h.o.margin != tc.margin || h.o.lifetime != 0 {
			t.Errorf("TTL %s: every %s margin %s lifetime %s, want %s %s 0", tc.ttl, h.o.every, h.o.margin, h.o.lifetime, tc.every, tc.margin)
		}
		h.halt()
		h2 := NewHold(farLease{tc.ttl}, 50*time.Millisecond, RenewEvery(-1), SafetyMargin(time.Second), MaxLifetime(time.Hour))
		if h2.o.every != tc.every || h2.o.margin != time.Second || h2.o.lifetime != time.Hour {
			t.Errorf("options: %+v", h2.o)
		}
		h2.halt()
	}
}
