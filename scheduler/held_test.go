package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
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
	s, be, j, cfg := skipScene(t, false, 8*time.Second, 0, nil)
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
// retry when its backoff ends, before h2's turn (h2 waits for the other
// hosts first, so that a fault of its own does not eat every attempt).
// Control: a retry state of another tick is not taken, though the host
// looked for this tick's.
func TestSkippedTickTakesAnotherHostsRetry(t *testing.T) {
	t.Parallel()
	t.Run("retry", func(t *testing.T) {
		t.Parallel()
		s, rec, nextAt, _ := skippedRetryRun(t, true)
		if rec.Host != "h1" || rec.Attempt != 2 {
			t.Fatalf("the retry h2 left of the skipped tick was not taken by the skipping host; last run %+v", rec)
		}
		if rec.Start.Before(nextAt) || !rec.Start.Before(nextAt.Add(s.otherHostsFirst())) {
			t.Errorf("the retry started at %s; want from its backoff's end %s until h2's turn, %s later",
				rec.Start.Format(time.StampMilli), nextAt.Format(time.StampMilli), s.otherHostsFirst())
		}
	})
	t.Run("NegativeControl", func(t *testing.T) {
		t.Parallel()
		_, rec, _, looks := skippedRetryRun(t, false)
		if looks == 0 {
			t.Fatal("the skipping host never looked for the tick's retry state")
		}
		if rec.Host == "h1" {
			t.Errorf("only another tick's retry state stored: the host that skipped the tick ran it: %+v", rec)
		}
	})
}

// retryReads counts the reads of one retry state.
type retryReads struct {
	lease.Backend
	name string
	n    atomic.Int64
}

func (r *retryReads) Get(ctx context.Context, space, name string) (lease.Entry, bool, error) {
	if space == lease.SpaceRetry && name == r.name {
		r.n.Add(1)
	}
	return r.Backend.Get(ctx, space, name)
}

// skippedRetryRun plays the scene above, with h2's retry state of the
// tick stored (ofTick), or one of the tick an hour before, the backoff
// ending three seconds on. It returns the host, the job's last run
// record, the end of the backoff, and how often the host read the tick's
// retry state.
func skippedRetryRun(t *testing.T, ofTick bool) (*Scheduler, RunRecord, time.Time, int64) {
	reads := &retryReads{}
	deadline := 6 * time.Second // the control waits for it
	if ofTick {
		deadline = time.Minute // ends with the run
	}
	s, be, j, cfg := skipScene(t, false, deadline, 1, func(b lease.Backend) lease.Backend { reads.Backend = b; return reads })
	tick := time.Now().Truncate(time.Second)
	reads.name = s.retryName(j.Name, tick)
	followed := followSkipped(t, s, be, j, cfg, tick)
	stateTick := tick
	if !ofTick {
		stateTick = tick.Add(-time.Hour)
	}
	nextAt := time.Now().Add(3 * time.Second).UTC()
	data, err := json.Marshal(retryState{Tick: stateTick.Unix(), Attempt: 1, Host: "h2", Result: "failed", NextAt: nextAt})
	if err != nil {
		t.Fatal(err)
	}
	e := lease.Entry{Name: s.retryName(j.Name, stateTick), Version: 1, Data: data, TTL: time.Minute}
	if err := s.be.Put(ctxFor(t, 10*time.Second), lease.SpaceRetry, e); err != nil {
		t.Fatal(err)
	}
	select {
	case <-followed:
	case <-time.After(time.Until(j.DeadlineFor(tick)) + 10*time.Second):
		t.Fatal("the follower of the skipped tick did not stop at its deadline")
	}
	_, rec := lastRun(t, s, j.Name)
	return s, rec, nextAt, reads.n.Load()
}

// skippedTickRun plays the scene above and reports the last run record of
// the job and whether it is the tick's run on the skipping host.
func skippedTickRun(t *testing.T, skipStops bool) (RunRecord, bool) {
	s, be, j, cfg := skipScene(t, skipStops, time.Minute, 0, nil)
	tick := time.Now().Truncate(time.Second) // its deadline a minute away
	followed := followSkipped(t, s, be, j, cfg, tick)
	// h2 starts the tick and dies (no renewal, no release): its lease
	// runs out after a TTL.
	_ = holdFor(t, be, s, j, cfg, tick, "h2")
	select {
	case <-followed:
	case <-time.After(2*cfg.Lease.TTL + 5*time.Second):
	}
	_, rec := lastRun(t, s, j.Name)
	return rec, rec.Host == s.host && rec.Tick.Equal(tick)
}

// followSkipped has s skip tick (skipFirstAttempt) and follow it until
// the test ends, then ends the older run that made it skip. The channel
// is closed when the follower returns.
func followSkipped(t *testing.T, s *Scheduler, be *redlock.Client, j *Job, cfg *Config, tick time.Time) <-chan struct{} {
	t.Helper()
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
	return followed
}

// skipScene is a host with one job ("ov", overlap: skip, deadline
// deadline, retries retries) on a Redis node of its own, its backend
// wrapped by wrap (nil: not).
func skipScene(t *testing.T, skipStops bool, deadline time.Duration, retries int, wrap func(lease.Backend) lease.Backend) (*Scheduler, *redlock.Client, *Job, *Config) {
	cluster := redistest.Start(t, 1)
	j := &Job{Name: "ov", Schedule: "@hourly", Shell: "true", Deadline: deadline, Retries: retries}
	cfg := tickConfig(t, cluster.URLs(), j)
	// Timeouts a loaded machine meets: what is tested is who runs the
	// tick, not how the host copes with a slow store.
	s, be := votingScheduler(t, cfg, 4*time.Second, 300*time.Millisecond, selfSupervisor(t), wrap)
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
