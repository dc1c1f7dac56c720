package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// ExecRequest is one `leasecron exec` run.
type ExecRequest struct {
	// Job is the job to run (Config.ExecJob).
	Job *Job
	// Tick is the slot: the lease's epoch, so that a slot completed
	// anywhere never runs again. Zero: no epoch, the lease is a
	// fleet-wide mutex for the command's lifetime.
	Tick time.Time
	// Wait, when set, waits for a lease held by another run (overlap
	// wait) until Deadline; otherwise a held lease skips the run.
	Wait bool
	// Deadline is the last moment a run may start; a lease that cannot
	// be taken (no quorum) is tried again until then.
	Deadline time.Time
}

// Reasons an Exec did not run its command (ExecSkipped.Reason).
const (
	SkipDone   = "done"   // the slot was completed, here or on another host
	SkipHeld   = "held"   // another run holds the lease
	SkipPaused = "paused" // the job is paused fleet-wide
	SkipLate   = "late"   // the slot's deadline passed before a run could start
)

// ExecSkipped is Exec's error when the command did not run, for a reason
// that is no failure: the slot is done, held elsewhere, paused or past its
// deadline.
type ExecSkipped struct {
	Reason string
	Err    error // the refusal, when there was one
}

func (e *ExecSkipped) Error() string {
	if e.Err != nil {
		return "skipped (" + e.Reason + "): " + e.Err.Error()
	}
	return "skipped (" + e.Reason + ")"
}

func (e *ExecSkipped) Unwrap() error { return e.Err }

// ErrNoLease means Exec could not take the lease: no quorum answered, or
// the pause flags could not be read, until the request's deadline.
var ErrNoLease = errors.New("the lease could not be taken")

// Exec runs req.Job once under its lease, as the daemon runs a tick: the
// pause flag honoured, the lease renewed while the command runs and the
// command killed before the lease could be lost, the run recorded in the
// job's history, the slot completed when the command ran to its end, and
// the job's hooks fired (the file's job of that name: on_start, on_success,
// on_failure). It returns the run's record when the command ran; an *ExecSkipped when
// it did not for a reason that is no failure; an error matching
// ErrNoLease when the lease could not be taken; the error of CannotLimit,
// before anything else, when the job's limits cannot be applied here.
func (s *Scheduler) Exec(ctx context.Context, req ExecRequest) (RunRecord, error) {
	cfg, j := s.cfg.Load(), req.Job
	if err := s.CannotLimit(j); err != nil {
		return RunRecord{}, err // never run unlimited; nothing taken or recorded
	}
	s.warm(ctx)
	breq := lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Owner: "tick=manual host=" + s.host}
	if !req.Tick.IsZero() {
		breq.Epoch, breq.EpochTime, breq.Owner = req.Tick.Unix(), req.Tick, owner(req.Tick.Unix(), s.host)
	}
	l, err := s.execAcquire(ctx, breq, req)
	if err != nil {
		return RunRecord{}, err
	}
	// The pause flags once more, now that the run would start (a pause
	// set while the lease was taken wins).
	if err := s.execPaused(ctx, j); err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), s.requestWait())
		_ = l.Release(rctx)
		cancel()
		return RunRecord{}, err
	}
	tick := req.Tick
	if tick.IsZero() {
		tick = s.now()
	}
	log := s.log.With("job", j.Name, "tick", execTickAttr(req.Tick))
	// The job's hooks, as the daemon fires them; waited for (within
	// hookDrain) before Exec returns.
	defer s.startHooks()()
	// No heartbeat loop runs in exec: read the pause flags as it would,
	// so that a pause --stop stops the command as it stops a daemon's run.
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() { defer close(polled); s.pauseStopLoop(pollCtx, cfg.Heartbeat) }()
	rec, _ := s.runLeased(ctx, cfg, j, tick, l, 1, log)
	stopPoll()
	<-polled
	if rec.Result == "error" {
		return rec, errors.New(rec.Error)
	}
	return rec, nil
}

// pauseStopLoop reads the pause flags every interval until ctx ends and
// stops the runs of jobs paused with --stop, as the daemon's heartbeat
// loop does. A read that fails keeps the last one.
func (s *Scheduler) pauseStopLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.readPauses(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("could not read the pause flags; a pause --stop of this job is seen at the next read", "err", err)
		}
		s.stopPausedRuns()
		t.Reset(interval)
	}
}

func execTickAttr(tick time.Time) string {
	if tick.IsZero() {
		return "manual"
	}
	return tick.UTC().Format(time.RFC3339)
}

// execPaused reads the pause flags afresh: an *ExecSkipped when the job is
// paused, ErrNoLease when they cannot be read (a run must not start on a
// flag it could not see).
func (s *Scheduler) execPaused(ctx context.Context, j *Job) error {
	p, err := s.readPauses(ctx)
	if err != nil {
		return fmt.Errorf("%w: the pause flags could not be read: %w", ErrNoLease, err)
	}
	if pi, ok := p.paused(j.Name); ok {
		return &ExecSkipped{Reason: SkipPaused, Err: fmt.Errorf("paused by %s: %s", pi.By, pi.Reason)}
	}
	return nil
}

// execAcquire reads the pause flags and takes the lease: one attempt,
// then, while the votes may have split between hosts that fired together
// (no holder on a quorum), a few more after short random delays; a lease
// held by another run skips (or, with req.Wait, is waited for until
// req.Deadline); no quorum, for the flags or the lease, is retried with
// backoff until req.Deadline.
func (s *Scheduler) execAcquire(ctx context.Context, breq lease.Request, req ExecRequest) (lease.Lease, error) {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if !req.Tick.IsZero() && s.now().After(req.Deadline) {
			return nil, &ExecSkipped{Reason: SkipLate, Err: fmt.Errorf("the slot's deadline %s passed", req.Deadline.UTC().Format(time.RFC3339))}
		}
		var res lease.Result
		switch err := s.execPaused(ctx, req.Job); {
		case errors.Is(err, ErrNoLease):
			res.Err = err
		case err != nil:
			return nil, err
		default:
			res = s.be.TryAcquireBatch(ctx, []lease.Request{breq})[0]
			if res.Err == nil {
				return res.Lease, nil
			}
		}
		var rerr *lease.RefusedError
		errors.As(res.Err, &rerr)
		var wait time.Duration
		switch {
		case errors.Is(res.Err, lease.ErrEpochDone):
			return nil, &ExecSkipped{Reason: SkipDone, Err: res.Err}
		case s.unvotable(res.Err):
			// Too many servers' data is younger than the slot: no quorum
			// will ever vote for it (it may have completed and lost its
			// mark with them), so waiting cannot help.
			return nil, fmt.Errorf("%w: %w", ErrNoLease, res.Err)
		case errors.Is(res.Err, lease.ErrHeld) && rerr != nil && rerr.HolderNodes < s.be.Quorum() && attempt < splitRetries:
			wait = rand.N(splitRetryBase<<attempt) + time.Millisecond
		case errors.Is(res.Err, lease.ErrHeld) && rerr != nil && rerr.HolderNodes < s.be.Quorum() && attempt == splitRetries:
			// Still no holder on a quorum: the votes may keep splitting
			// between hosts that fired together, and then nobody runs the
			// slot. Once more when the split votes have run out.
			wait = rerr.HolderTTL + 5*time.Millisecond
		case errors.Is(res.Err, lease.ErrHeld):
			if !req.Wait {
				return nil, &ExecSkipped{Reason: SkipHeld, Err: res.Err}
			}
			wait = heldWait(rerr, s.be.Quorum(), attempt)
		default:
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		}
		if !s.now().Add(wait).Before(req.Deadline) {
			if errors.Is(res.Err, lease.ErrHeld) {
				return nil, &ExecSkipped{Reason: SkipHeld, Err: res.Err}
			}
			if errors.Is(res.Err, ErrNoLease) {
				return nil, res.Err
			}
			return nil, fmt.Errorf("%w: %w", ErrNoLease, res.Err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(ErrNoLease, res.Err, ctx.Err())
		case <-t.C:
		}
	}
}
