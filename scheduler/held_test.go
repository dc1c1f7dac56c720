package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestSkippedTickTakenOverWhenItsRunnerDies: a host whose first attempt
// at a tick found an older tick's run holding the lease skips the tick
// (overlap: skip). The older run ends; another host (h2) starts the tick
// and dies at once. The skipping host saw h2 start it, so it takes the
// tick over and runs it. Control: a host that gives the tick up at its
// first attempt (skipStops) never runs it.
func TestSkippedTickTakenOverWhenItsRunnerDies(t *testing.T) {
	t.Parallel()
	t.Run("watch", func(t *testing.T) {
		t.Parallel()
		if rec, ran := skippedTickRun(t, false); !ran {
			t.Errorf("the skipped tick, started by a host that died, was not taken over; last run %+v", rec)
		}
	})
	t.Run("NegativeControl", func(t *testing.T) {
		t.Parallel()
		if rec, ran := skippedTickRun(t, true); ran {
			t.Errorf("skipStops: the host that gave the tick up ran it: %+v", rec)
		}
	})
}

// TestSkippedTickNobodyStartsNotRun: the same skip, but no host starts
// the tick after the older run ended: the watching host never runs it,
// and stops watching at the deadline.
func TestSkippedTickNobodyStartsNotRun(t *testing.T) {
	t.Parallel()
	s, be, j, cfg := skipScene(t, false, 8*time.Second)
	tick := time.Now().Truncate(time.Second)
	prev, first := skipFirstAttempt(t, s, be, j, cfg, tick)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.followTick(context.Background(), context.Background(), cfg, j, tick, first, 0)
	}()
	if err := prev.Complete(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Until(j.DeadlineFor(tick)) + 10*time.Second):
		t.Fatal("the watch of the skipped tick did not stop at its deadline")
	}
	if _, rec := lastRun(t, s, j.Name); rec.Tick.Equal(tick) {
		t.Errorf("the skipped tick, which no host started, ran: %+v", rec)
	}
}

// TestSkippedTickTakesAnotherHostsRetry: as above, but h2's attempt at
// the tick fails and h2 leaves a retry for the fleet (the lease free
// between attempts, the retry state stored). The skipping host takes the
// retry — h2 waits for the other hosts first, so that a fault of its own
// does not eat every attempt. Control: the same free lease with no retry
// state is not taken.
func TestSkippedTickTakesAnotherHostsRetry(t *testing.T) {
	t.Parallel()
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		if rec := skippedRetryRun(t, true); rec.Host != "h1" || rec.Attempt != 2 {
			t.Errorf("the retry h2 left of the skipped tick was not taken by the skipping host; last run %+v", rec)
		}
	})
	t.Run("NegativeControl", func(t *testing.T) {
		t.Parallel()
		if rec := skippedRetryRun(t, false); rec.Host == "h1" {
			t.Errorf("no retry state: the host that skipped the tick ran it: %+v", rec)
		}
	})
}

// skippedRetryRun plays the scene above (h2's retry state stored when
// withRetry) and returns the last run record of the job.
func skippedRetryRun(t *testing.T, withRetry bool) RunRecord {
	s, be, j, cfg := skipScene(t, false, 6*time.Second)
	j.Retries = 1
	tick := time.Now().Truncate(time.Second)
	prev, first := skipFirstAttempt(t, s, be, j, cfg, tick)
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		s.followTick(ctx, ctx, cfg, j, tick, first, 0)
	}()
	t.Cleanup(func() { cancel(); <-followed })
	if err := prev.Complete(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if withRetry {
		st := retryState{Tick: tick.Unix(), Attempt: 1, Host: "h2", Result: "failed", NextAt: time.Now().UTC()}
		if err := s.writeRetry(ctxFor(t, 10*time.Second), j, tick, nil, st); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-followed:
	case <-time.After(time.Until(j.DeadlineFor(tick)) + 10*time.Second):
		t.Fatal("the follower of the skipped tick did not stop at its deadline")
	}
	_, rec := lastRun(t, s, j.Name)
	return rec
}

// skippedTickRun plays the scene above and reports the last run record of
// the job and whether it is the tick's run on the skipping host.
func skippedTickRun(t *testing.T, skipStops bool) (RunRecord, bool) {
	s, be, j, cfg := skipScene(t, skipStops, time.Minute)
	tick := time.Now().Truncate(time.Second) // its deadline a minute away
	prev, first := skipFirstAttempt(t, s, be, j, cfg, tick)
	ctx, cancel := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		s.followTick(ctx, ctx, cfg, j, tick, first, 0)
	}()
	t.Cleanup(func() { cancel(); <-followed })

	// The older run ends; h2 starts the tick and dies (no renewal, no
	// release): its lease runs out after a TTL.
	if err := prev.Complete(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = holdFor(t, be, s, j, cfg, tick, "h2")
	select {
	case <-followed:
	case <-time.After(2*cfg.Lease.TTL + 5*time.Second):
	}
	_, rec := lastRun(t, s, j.Name)
	return rec, rec.Host == s.host && rec.Tick.Equal(tick)
}

// skipScene is a host with one job ("ov", overlap: skip, deadline
// deadline) on a Redis node of its own.
func skipScene(t *testing.T, skipStops bool, deadline time.Duration) (*Scheduler, *redlock.Client, *Job, *Config) {
	cluster := redistest.Start(t, 1)
	j := &Job{Name: "ov", Schedule: "@hourly", Shell: "true", Deadline: deadline}
	cfg := tickConfig(t, cluster.URLs(), j)
	// Timeouts a loaded machine meets: what is tested is who runs the
	// tick, not how the host copes with a slow store.
	s, be := votingScheduler(t, cfg, 4*time.Second, 300*time.Millisecond, selfSupervisor(t), nil)
	s.setTestHooks(func(h *testHooks) { h.skipStops = skipStops })
	return s, be, s.cfg.Load().Jobs[0], cfg
}

// skipFirstAttempt has h0 hold the job's lease for a tick an hour before
// tick, and returns that lease and s's first attempt at tick, refused as
// held by it.
func skipFirstAttempt(t *testing.T, s *Scheduler, be *redlock.Client, j *Job, cfg *Config, tick time.Time) (lease.Lease, lease.Result) {
	t.Helper()
	prev := holdFor(t, be, s, j, cfg, tick.Add(-time.Hour), "h0")
	first := s.be.TryAcquireBatch(ctxFor(t, 10*time.Second), []lease.Request{s.request(cfg, j, tick)})[0]
	var rerr *lease.RefusedError
	if !errors.As(first.Err, &rerr) || !errors.Is(rerr.Reason, lease.ErrHeld) {
		t.Fatalf("first attempt: %v; want held by the older tick", first.Err)
	}
	return prev, first
}

// holdFor takes j's lease for tick as host (acquireRetrying).
func holdFor(t *testing.T, be *redlock.Client, s *Scheduler, j *Job, cfg *Config, tick time.Time, host string) lease.Lease {
	t.Helper()
	return acquireRetrying(t, be, lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), host)})
}
