package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// retryState is the retry state of a tick of a job (backend space
// "retry", one entry per job and tick, expiring a lease TTL after the
// tick's deadline): the last failed attempt and when the next may start.
// The host of a failed attempt writes it before it releases the lease;
// the winner of the next attempt reads it after it won the lease, so it
// always sees it.
type retryState struct {
	Tick    int64     `json:"tick"`    // the tick's Unix time
	Attempt int       `json:"attempt"` // the attempt that failed, from 1
	Host    string    `json:"host"`    // where it failed
	Result  string    `json:"result"`  // failed or timeout
	NextAt  time.Time `json:"next_at"` // the backoff ends
}

// readRetry returns j's retry state for tick, nil when the tick has none
// (its first attempt). A state that cannot be decoded (written by another
// version, say) is logged and counts as none: the tick is not blocked.
func (s *Scheduler) readRetry(ctx context.Context, j *Job, tick time.Time, log *slog.Logger) (*retryState, error) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	e, ok, err := s.be.Get(rctx, lease.SpaceRetry, s.retryName(j.Name, tick))
	if err != nil || !ok {
		return nil, err
	}
	var st retryState
	if err := json.Unmarshal(e.Data, &st); err != nil || st.Tick != tick.Unix() || st.Attempt < 1 {
		log.Warn("ignoring a retry state that cannot be read; counting this as the tick's first attempt", "data", string(e.Data), "err", err)
		return nil, nil
	}
	return &st, nil
}

// writeRetry stores st while hold (nil: none) still holds the run's
// lease and ctx (the daemon's hard stop) lasts, trying until the retry
// could no longer start before the tick's deadline, for at most
// retryWriteTTLs lease TTLs: a store slow to answer (a loaded machine)
// delays the retry instead of cancelling it, and a store that keeps
// refusing the write while it renews the lease (a full etcd, a locked
// entries table) does not keep the job's lease for long. The entry lives
// until a lease TTL after the tick's deadline.
func (s *Scheduler) writeRetry(ctx context.Context, j *Job, tick time.Time, hold *lease.Hold, st retryState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	deadline := j.DeadlineFor(tick)
	ttl := max(s.until(deadline), 0) + s.base.Lease.TTL
	e := lease.Entry{Name: s.retryName(j.Name, tick), Version: int64(st.Attempt), Data: data, TTL: ttl}
	budget := min(s.until(deadline.Add(-lastTryMargin)), retryWriteTTLs*s.base.Lease.TTL)
	return s.whileHeld(ctx, hold, budget, func(ctx context.Context) error { return s.be.Put(ctx, lease.SpaceRetry, e) })
}

// retryWriteTTLs bounds writeRetry, in lease TTLs.
const retryWriteTTLs = 3

// whileHeld calls op (each call bounded by requestWait) until it
// succeeds, with a doubling pause between calls, for up to budget, while
// ctx lasts and while hold (nil: none) has the run's lease (see
// leaseGone; a call is also bounded by the lease's validity): what op
// writes must be stored before the lease is completed or released, and
// is worth nothing once the lease is lost. A bad name or a closed
// backend is not tried again. It returns op's last error.
func (s *Scheduler) whileHeld(ctx context.Context, hold *lease.Hold, budget time.Duration, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var holdDone <-chan struct{}
	if hold != nil {
		holdDone = hold.Done()
	}
	var err error
	for wait := 50 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		if gone := leaseGone(hold); gone != nil {
			return errors.Join(err, gone)
		}
		rctx, rcancel := context.WithTimeout(ctx, s.requestWait())
		if hold != nil {
			rctx, rcancel = context.WithDeadline(rctx, hold.ValidUntil())
		}
		err = op(rctx)
		rcancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, lease.ErrBadName) || errors.Is(err, lease.ErrClosed) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-holdDone:
			t.Stop()
			holdDone = nil // checked by leaseGone; a hold stopped at its lifetime stays closed
		case <-t.C:
		}
	}
}

// leaseGone says why the lease hold keeps is no longer this host's: the
// hold lost it, or its validity ended (a hold stopped at its maximum
// lifetime no longer renews); nil while it is, or when hold is nil.
func leaseGone(hold *lease.Hold) error {
	switch {
	case hold == nil:
		return nil
	case errors.Is(hold.Err(), lease.ErrLost):
		return hold.Err()
	case !time.Now().Before(hold.ValidUntil()):
		return errors.New("the lease's validity ended")
	}
	return nil
}

// otherHostsFirst is how long after a retry's backoff the host whose
// attempt failed waits before it tries the retry itself: long enough
// for every host watching the tick to look at the free lease once (they
// look at least once per lease TTL).
func (s *Scheduler) otherHostsFirst() time.Duration { return s.base.Lease.TTL + time.Second }

// retryStart is when this host may start the retry after st: at its
// NextAt, or, on the host where st failed, otherHostsFirst later (if
// that is still before the deadline and other live hosts may run the
// job), so that a host-local fault does not eat every attempt. A view
// of the hosts that shows no other is read again first: it may predate
// their heartbeats (a fleet that just started).
func (f *follower) retryStart(st *retryState, deadline time.Time) (time.Time, string) {
	at := st.NextAt
	if st.Host != f.s.host {
		return at, "backoff"
	}
	later := at.Add(f.s.otherHostsFirst())
	if !later.Before(deadline.Add(-lastTryMargin)) {
		return at, "backoff; no other host can take it in time"
	}
	if !f.othersEligible() {
		f.s.rereadView(f.ctx)
		if !f.othersEligible() {
			return at, "backoff; no other live host may run the job"
		}
	}
	return later, "backoff, then other hosts first"
}

// othersEligible reports whether the heartbeats show another live host
// that may run the job (true when they are unknown).
func (f *follower) othersEligible() bool {
	hosts := f.s.liveHosts(f.cfg)
	if hosts == nil {
		return true
	}
	for _, h := range hosts {
		if h.Host != f.s.host && f.j.RunOn.Eligible(h.Host, h.Labels) {
			return true
		}
	}
	return false
}

// planRetry decides, for a run of tick that ended with rec, whether the
// tick is retried: the run failed (or timed out, with retry_on_timeout),
// attempts are left and the retry can start before the deadline. Then it
// stores the retry state (while hold keeps the lease) and returns when
// the retry is due; zero: the tick is completed.
func (s *Scheduler) planRetry(ctx context.Context, j *Job, tick time.Time, hold *lease.Hold, rec RunRecord, log *slog.Logger) time.Time {
	retryable := rec.Result == "failed" || rec.Result == ResultOOM || rec.Result == ResultLimit ||
		(rec.Result == "timeout" && j.RetryOnTimeout)
	if !retryable || j.Retries == 0 || rec.Tick.IsZero() {
		return time.Time{}
	}
	if rec.Attempt > j.Retries {
		log.Warn("the job failed and its retries are spent; completing the tick", "attempts", rec.Attempt, "retries", j.Retries)
		s.opts.Metrics.RetriesExhausted(j.Name)
		return time.Time{}
	}
	next := s.now().Add(j.RetryWait(rec.Attempt))
	if deadline := j.DeadlineFor(tick); !next.Before(deadline.Add(-lastTryMargin)) {
		log.Warn("the job failed and a retry could not start before the tick's deadline; completing the tick",
			"attempt", rec.Attempt, "retry_at", next.UTC().Format(time.RFC3339), "deadline", deadline.UTC().Format(time.RFC3339))
		s.opts.Metrics.RetriesExhausted(j.Name)
		return time.Time{}
	}
	st := retryState{Tick: tick.Unix(), Attempt: rec.Attempt, Host: s.host, Result: rec.Result, NextAt: next.UTC()}
	if err := s.writeRetry(ctx, j, tick, hold, st); err != nil {
		log.Error("could not store the retry state; completing the tick without a retry", "err", err)
		s.opts.Metrics.RetriesExhausted(j.Name)
		return time.Time{}
	}
	if deadline := j.DeadlineFor(tick); !s.now().Before(deadline.Add(-lastTryMargin)) {
		// Stored too late for the retry to start (a slow store).
		log.Warn("the retry state was stored too late for a retry before the tick's deadline; completing the tick",
			"attempt", rec.Attempt, "deadline", deadline.UTC().Format(time.RFC3339))
		s.opts.Metrics.RetriesExhausted(j.Name)
		return time.Time{}
	}
	log.Info("the job failed; retrying the tick", "attempt", rec.Attempt, "retries", j.Retries, "retry_at", next.UTC().Format(time.RFC3339Nano))
	return next
}

// complete completes a won lease's tick without running it.
func (s *Scheduler) complete(l lease.Lease, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), max(s.base.Lease.TTL, 5*time.Second))
	defer cancel()
	if err := l.Complete(ctx); err != nil {
		log.Error("could not complete the tick", "err", err)
	}
}
