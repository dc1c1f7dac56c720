package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestRetryStateOutlastsStorePause: the store freezes (SIGSTOP) for 6s
// just as a failed run stores its tick's retry state. The lease is still
// held (renewals resume before its validity ends), so the state is
// stored once the store answers again and the retry is not lost; a
// write given half a TTL (5s), as the daemon once gave it, fails under
// the same freeze (the control: the freeze does defeat a short budget).
// When the freeze outlasts the lease, the write gives up as the hold
// loses the lease, long before its budget (the tick's deadline).
func TestRetryStateOutlastsStorePause(t *testing.T) {
	t.Parallel()
	cluster := redistest.Start(t, 1)
	node := cluster.Nodes[0]
	j := &Job{Name: "flaky", Schedule: "@hourly", Shell: "exit 3", Retries: 1, Deadline: time.Minute}
	cfg := tickConfig(t, cluster.URLs(), j)
	// The node is frozen here, never restarted, and what is tested is the
	// write, not the restart guard.
	s, be := votingScheduler(t, cfg, 10*time.Second, 100*time.Millisecond, "/nonexistent/leasecron-supervisor", nil)

	// hold renews every second: at least 9s of validity are left when
	// the store freezes, and the hold declares the lease lost a safety
	// margin (205ms) and a timeout before it ends.
	newHold := func(key string) *lease.Hold {
		// Asked again while the node is slow to answer (a loaded machine):
		// the freeze comes after.
		ctx := ctxFor(t, 10*time.Second)
		l, err := be.Acquire(ctx, lease.Request{Key: key, TTL: cfg.Lease.TTL, Owner: "h1"})
		for err != nil && errors.Is(err, lease.ErrNoQuorum) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			l, err = be.Acquire(ctx, lease.Request{Key: key, TTL: cfg.Lease.TTL, Owner: "h1"})
		}
		if err != nil {
			t.Fatal(err)
		}
		h := lease.NewHold(l, be.Timeout(), lease.RenewEvery(time.Second))
		t.Cleanup(func() { _ = h.Release(context.Background()) })
		return h
	}
	frozenFor := func(d time.Duration, write func() error) (error, time.Duration) {
		t.Helper()
		node.Pause()
		timer := time.AfterFunc(d, node.Resume)
		defer func() { timer.Stop(); node.Resume() }()
		start := time.Now()
		err := write()
		return err, time.Since(start)
	}

	tick := time.Now().Truncate(time.Second) // its deadline a minute away
	hold := newHold("held")
	st := retryState{Tick: tick.Unix(), Attempt: 1, Host: "h1", Result: "failed", NextAt: time.Now().UTC()}
	err, took := frozenFor(6*time.Second, func() error { return s.writeRetry(context.Background(), j, tick, hold, st) })
	if err != nil {
		t.Fatalf("the retry state was not stored across a 6s freeze of the store (after %s): %v; the tick's retry would be lost", took, err)
	}
	if got, err := s.readRetry(ctxFor(t, 10*time.Second), j, tick, s.log); err != nil || got == nil || got.Attempt != 1 {
		t.Fatalf("retry state read back: %+v, %v; want attempt 1", got, err)
	}
	if hold.Err() != nil {
		t.Fatalf("the hold lost the lease during a freeze shorter than its validity: %v", hold.Err())
	}

	// Control: half a TTL is not enough for the same freeze.
	entry := lease.Entry{Name: s.retryName(j.Name, tick.Add(time.Minute)), Version: 1, Data: []byte("{}"), TTL: time.Minute}
	err, took = frozenFor(6*time.Second, func() error {
		return s.whileHeld(context.Background(), hold, cfg.Lease.TTL/2, func(ctx context.Context) error { return be.Put(ctx, lease.SpaceRetry, entry) })
	})
	if err == nil {
		t.Fatalf("a write given half a TTL succeeded across a 6s freeze (after %s): the freeze did not test the budget", took)
	}

	// A freeze longer than the lease: the write stops when the hold
	// loses it, not at its budget (30s).
	lost := newHold("lost")
	var lostAt time.Time
	watched := make(chan struct{})
	go func() { <-lost.Done(); lostAt = time.Now(); close(watched) }()
	err, took = frozenFor(15*time.Second, func() error { return s.writeRetry(context.Background(), j, tick, lost, st) })
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("write during a freeze that outlived the lease: %v after %s; want it to give up with the lost lease", err, took)
	}
	returned := time.Now()
	<-watched
	// One request (requestWait, 1s) may be under way when the hold
	// loses the lease; the write ends with it.
	if after := returned.Sub(lostAt); after > 3*time.Second {
		t.Errorf("the write gave up %s after the hold lost the lease (%s into the freeze)", after, took)
	}
}

// TestRetryLeftToOthersWhenViewPredatesThem: the host whose attempt
// failed gives the other hosts the first chance at the retry. Its view
// of the live hosts, read before the others' first heartbeats (a fleet
// that just started), shows only itself: it reads the heartbeats again
// before it decides, sees h2 and leaves the retry to it. With h2's
// heartbeat gone, it retries at once itself (the control: the decision
// does turn on what it reads).
func TestRetryLeftToOthersWhenViewPredatesThem(t *testing.T) {
	t.Parallel()
	j := &Job{Name: "flaky", Schedule: "@hourly", Shell: "exit 3", Retries: 1, Deadline: time.Minute}
	s, cfg := tickScheduler(t, j)
	j = s.cfg.Load().Jobs[0]
	beat := func(host string, ttl time.Duration) {
		data, _ := json.Marshal(HostBeat{Host: host, Seen: time.Now().UTC()})
		e := lease.Entry{Name: storeName(host), Version: time.Now().UnixNano(), Data: data, TTL: ttl}
		if err := s.be.Put(ctxFor(t, 10*time.Second), lease.SpaceHosts, e); err != nil {
			t.Fatal(err)
		}
	}
	beat(s.host, time.Minute)
	beat("h2", time.Minute)
	f := &follower{s: s, ctx: context.Background(), cfg: cfg, j: j, tick: time.Now(), log: s.log}
	st := &retryState{Attempt: 1, Host: s.host, Result: "failed", NextAt: time.Now()}
	deadline := time.Now().Add(time.Minute)

	s.view.Store(&fleetView{hosts: []HostBeat{{Host: s.host}}, read: time.Now()})
	if at, why := f.retryStart(st, deadline); !at.After(st.NextAt) {
		t.Errorf("h2's heartbeat is stored but the view predates it: retry at %s (%s); want other hosts first", at, why)
	}

	beat("h2", time.Millisecond) // h2's heartbeat expires
	time.Sleep(50 * time.Millisecond)
	s.view.Store(&fleetView{hosts: []HostBeat{{Host: s.host}}, read: time.Now()})
	if at, why := f.retryStart(st, deadline); !at.Equal(st.NextAt) {
		t.Errorf("no other live host: retry at %s (%s); want at once, %s", at, why, st.NextAt)
	}
}

// votingScheduler is a Scheduler on cfg's Redis nodes with lease TTL ttl
// (renewed every second) and per-node timeout timeout, whose nodes vote
// at once (no restart detection, which would keep them from voting for a
// TTL after their start: for tests of something else), running jobs
// under the supervisor binary self; wrap, when set, wraps its backend.
func votingScheduler(t *testing.T, cfg *Config, ttl, timeout time.Duration, self string, wrap func(lease.Backend) lease.Backend) (*Scheduler, *redlock.Client) {
	t.Helper()
	be := votingBackend(t, cfg, ttl, timeout)
	var b lease.Backend = be
	if wrap != nil {
		b = wrap(be)
	}
	s, err := New(cfg, Options{Self: self, Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, be
}

// votingBackend sets cfg's lease TTL to ttl (renewed every second) and
// its per-node timeout to timeout, and opens its Redis nodes without
// restart detection, as votingScheduler does.
func votingBackend(t *testing.T, cfg *Config, ttl, timeout time.Duration) *redlock.Client {
	t.Helper()
	cfg.Lease.TTL, cfg.Lease.Renew = ttl, time.Second
	redisOf(cfg).Timeout = timeout
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix,
		Options: []redlock.Option{redlock.WithTimeout(timeout), redlock.WithoutRestartDetection()}})
	if err != nil {
		t.Fatal(err)
	}
	return be
}
