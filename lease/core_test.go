package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestValidity pins the formula every driver counts validity with:
// ttl − elapsed − (ttl × drift + 2 ms), elapsed from before the request.
func TestValidity(t *testing.T) {
	start := time.Now().Add(-time.Second)
	v := lease.Validity(start, 10*time.Second, 0.01)
	// At least one second elapsed: at most 10s − 1s − 100ms − 2ms.
	if max := 10*time.Second - time.Second - 102*time.Millisecond; v > max {
		t.Errorf("Validity = %s, want at most %s", v, max)
	}
	if v <= 0 || v < 8*time.Second {
		t.Errorf("Validity = %s, want about 8.9s", v)
	}
	if lease.Validity(time.Now().Add(-time.Second), time.Second, 0) > -2*time.Millisecond {
		t.Error("a request that took the whole TTL left validity")
	}
	for _, d := range []float64{-0.1, 1, 1.5} {
		if lease.CheckDrift(d) == nil {
			t.Errorf("drift %v accepted", d)
		}
	}
	if lease.CheckDrift(lease.DefaultDrift) != nil || lease.DefaultDrift != 0.01 {
		t.Errorf("default drift %v refused or not 1 %%", lease.DefaultDrift)
	}
}

// TestRenewalTiming pins the rule ttl·(1−drift) ≥ renew + kill_grace +
// (200ms + 2T) + 2T.
func TestRenewalTiming(t *testing.T) {
	T := 100 * time.Millisecond
	if got := lease.KillMargin(T); got != 400*time.Millisecond {
		t.Errorf("KillMargin(100ms) = %s, want 400ms", got)
	}
	if got := lease.RenewalNeed(10*time.Second, 5*time.Second, T); got != 15600*time.Millisecond {
		t.Errorf("RenewalNeed = %s, want 15.6s", got)
	}
	// ttl 16s: 16 × 0.99 = 15.84s ≥ 15.6s; 15.7s × 0.99 < 15.6s.
	if !lease.RenewalFits(16*time.Second, 0.01, 10*time.Second, 5*time.Second, T) {
		t.Error("16s does not fit")
	}
	if lease.RenewalFits(15700*time.Millisecond, 0.01, 10*time.Second, 5*time.Second, T) {
		t.Error("15.7s fits")
	}
}

func TestNewTokens(t *testing.T) {
	seen := map[string]bool{}
	for _, tok := range append(lease.NewTokens(50), lease.NewToken()) {
		if len(tok) != 32 || strings.Trim(tok, "0123456789abcdef") != "" {
			t.Fatalf("token %q is not 128 bits in hex", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q twice", tok)
		}
		seen[tok] = true
	}
}

func TestState(t *testing.T) {
	req := lease.Request{Key: "k", TTL: time.Second, Epoch: 7, Owner: "o"}
	s := lease.NewState(req, "tok", 42)
	if s.Key() != "k" || s.Owner() != "o" || s.Epoch() != 7 || s.TTL() != time.Second || s.Token() != "tok" || s.Fence() != 42 || s.Request() != req {
		t.Fatalf("accessors: %+v", s.Request())
	}
	if !s.ValidUntil().IsZero() || s.Gone() {
		t.Fatal("valid before SetValidUntil")
	}
	past := time.Now().Add(-time.Millisecond)
	if !s.SetValidUntil(past) || !s.ValidUntil().Equal(past) {
		t.Fatal("SetValidUntil did not set")
	}
	if !s.Lapse(time.Now()) || !s.ValidUntil().Equal(past) || !s.Gone() {
		t.Fatal("Lapse: not gone, or ValidUntil changed")
	}
	if s.SetValidUntil(time.Now().Add(time.Hour)) {
		t.Fatal("SetValidUntil after Lapse")
	}
	if s.Invalidate() != true || !s.ValidUntil().IsZero() {
		t.Fatal("Invalidate: not reported as already gone, or ValidUntil kept")
	}
	fresh := lease.NewState(req, "t2", 1)
	fresh.SetValidUntil(time.Now().Add(time.Hour))
	if fresh.Lapse(time.Now()) {
		t.Fatal("Lapse before the validity ended")
	}
	if fresh.Invalidate() {
		t.Fatal("first Invalidate reported already gone")
	}
}

func TestRetryComplete(t *testing.T) {
	if got := []time.Duration{lease.CompleteBackoff(0), lease.CompleteBackoff(1), lease.CompleteBackoff(6), lease.CompleteBackoff(7), lease.CompleteBackoff(100)}; fmt.Sprint(got) != "[10ms 20ms 640ms 1s 1s]" {
		t.Errorf("backoff %v", got)
	}
	tries := 0
	err := lease.RetryComplete(context.Background(), func(context.Context) (bool, error) {
		tries++
		if tries < 3 {
			return false, errors.New("no answer")
		}
		return true, nil
	})
	if err != nil || tries != 3 {
		t.Errorf("retried %d times, err %v; want 3, nil", tries, err)
	}
	tries = 0
	err = lease.RetryComplete(context.Background(), func(context.Context) (bool, error) {
		tries++
		return false, fmt.Errorf("complete: %w", lease.ErrClosed)
	})
	if !errors.Is(err, lease.ErrClosed) || tries != 1 {
		t.Errorf("closed: %d tries, %v", tries, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = lease.RetryComplete(ctx, func(context.Context) (bool, error) {
		cancel()
		return false, lease.ErrNoQuorum
	})
	if !errors.Is(err, lease.ErrNoQuorum) || !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended: %v, want both causes", err)
	}
}

func TestCheckBatch(t *testing.T) {
	reqs := []lease.Request{{Key: "a"}, {Key: ""}, {Key: "a"}, {Key: "b"}}
	out, valid := lease.CheckBatch(reqs, func(r lease.Request) error {
		if r.Key == "" {
			return errors.New("empty key")
		}
		return nil
	})
	if fmt.Sprint(valid) != "[0 3]" || out[0].Err != nil || out[1].Err == nil || out[2].Err == nil || out[3].Err != nil {
		t.Errorf("valid %v, results %+v", valid, out)
	}
}
