package lease_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// Timing of the renewal tests: the config rule's tightest lease for a
// request timeout T: ttl·(1−drift) = renew + kill_grace + kill margin + 2T,
// where the scheduler's kill margin is 200ms + 2T (see the scheduler's
// config rule).
const (
	timingT     = time.Second
	timingRenew = 2 * time.Second
	timingGrace = 500 * time.Millisecond
	timingKill  = 200*time.Millisecond + 2*timingT
)

// tightestTTL is the smallest whole-millisecond ttl the rule accepts.
func tightestTTL() time.Duration {
	need := timingRenew + timingGrace + timingKill + 2*timingT
	return time.Duration(math.Ceil(float64(need)/(1-redlock.DefaultDrift)/1e6)) * time.Millisecond
}

// sigtermModel records, as the scheduler's supervisor would enforce them,
// when the job gets SIGTERM: kill_grace before its kill deadline, which is
// the kill margin before the validity each renewal reports. A renewal
// reported after the SIGTERM it was meant to push back is a job aborted
// while its lease is healthy.
type sigtermModel struct {
	mu      sync.Mutex
	term    time.Time // SIGTERM instant set by the latest renewal
	renewed int
	late    []time.Duration // how long after its SIGTERM each late renewal came
}

func (m *sigtermModel) onRenew(v time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if !m.term.IsZero() {
		m.renewed++
		if now.After(m.term) {
			m.late = append(m.late, now.Sub(m.term))
		}
	}
	m.term = v.Add(-timingKill - timingGrace)
}

// runSlowReplies holds a lease on a real Redis node behind a proxy that
// delays every packet by 0.35T each way (round trips of 0.7T, under the
// timeout T), with the tightest lease the rule accepts, for four renew
// periods, and returns the model of the job's supervisor.
func runSlowReplies(t *testing.T, opts ...lease.HoldOption) *sigtermModel {
	t.Helper()
	node := redistest.Start(t, 1).Nodes[0]
	node.Proxy().SetDelay(35 * timingT / 100)
	b, err := redlock.Open(context.Background(), redlock.Config{Nodes: []string{node.ProxiedURL()}, Prefix: "holdtiming", Options: []redlock.Option{redlock.WithTimeout(timingT), redlock.WithoutRestartDetection()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ttl := tightestTTL()
	var l lease.Lease
	for l == nil { // a round trip over T under load fails: try again
		if l, err = b.Acquire(ctx, lease.Request{Key: "k", TTL: ttl, Owner: "a"}); err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	m := &sigtermModel{}
	opts = append([]lease.HoldOption{lease.RenewEvery(timingRenew), lease.OnRenew(m.onRenew)}, opts...)
	h := lease.NewHold(l, b.Timeout(), opts...)
	defer func() { _ = h.Release(context.Background()) }()
	select {
	case <-h.Done():
		t.Fatalf("hold lost: %v", h.Err())
	case <-time.After(4*timingRenew + timingRenew/2):
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.renewed < 3 {
		t.Fatalf("only %d renewals in four renew periods", m.renewed)
	}
	return m
}

// TestHoldRenewalBeatsSIGTERMWithSlowReplies: with replies that take most
// of the request timeout and the tightest lease the config rule accepts,
// every renewal reaches the supervisor before the SIGTERM the previous
// one scheduled, since renewals are timed from the validity (the start of
// the previous Extend), not from when it returned.
func TestHoldRenewalBeatsSIGTERMWithSlowReplies(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a lease for ~9s")
	}
	m := runSlowReplies(t)
	if len(m.late) > 0 {
		t.Errorf("%d of %d renewals came after the SIGTERM of the previous validity (by %v): a healthy job would be aborted",
			len(m.late), m.renewed, m.late)
	}
}

// TestHoldRenewalAfterReturnIsLate is the negative control: re-arming the
// renew timer when Extend returns adds each reply's latency to the period,
// and the same lease and replies let a renewal land after SIGTERM.
func TestHoldRenewalAfterReturnIsLate(t *testing.T) {
	if testing.Short() {
		t.Skip("holds a lease for ~9s")
	}
	m := runSlowReplies(t, lease.RenewAfterReturn())
	if len(m.late) == 0 {
		t.Errorf("all %d renewals came before SIGTERM with the timer re-armed after Extend returns: the test no longer sees the fault", m.renewed)
	}
}
