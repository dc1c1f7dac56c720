package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// follower carries one (job, tick) from its first acquisition attempt to
// the end: run it if won (and again for a retry), else apply the loser
// rules until the deadline.
type follower struct {
	s         *Scheduler
	ctx, hard context.Context
	wg        *sync.WaitGroup // owns the missed tick's recorder (nil: waited for)
	cfg       *Config
	j         *Job
	tick      time.Time
	// slot is true while the follower holds one of the host's
	// max_parallel run slots.
	slot bool
	// pausesNow returns the pause flags to check before a run starts; on
	// error the run does not start (the lease is released and the tick
	// tried again): a stale read could start a job paused since.
	pausesNow func() (pauses, error)
	log       *slog.Logger
	// missReason, when set at the end of run, is why the tick did not
	// run on this host: it is then recorded as missed unless it ran
	// elsewhere (see noteMiss).
	missReason string
}

// run follows the tick from the first attempt's result res; lateBy is how
// late after its start time the first attempt was made.
func (f *follower) run(res lease.Result, lateBy time.Duration) {
	f.log = f.s.log.With("job", f.j.Name, "tick", f.tick.UTC().Format(time.RFC3339))
	defer func() {
		if f.missReason != "" {
			if f.wg != nil {
				f.s.noteMiss(f.ctx, f.wg, f.j, f.tick, f.missReason)
				return
			}
			var wg sync.WaitGroup // a follower of its own: record here
			f.s.noteMiss(f.ctx, &wg, f.j, f.tick, f.missReason)
			wg.Wait()
		}
	}()
	defer f.freeSlot()
	st := f.newFollowState(res)
	for attempt := 0; ; attempt++ {
		st.runsElsewhere = false
		var wait time.Duration
		if res.Err == nil {
			f.s.opts.Metrics.Acquire(f.j.Name, "won")
			w, stop, err := f.won(res.Lease, st.deadline, attempt == 0, lateBy)
			if stop {
				return
			}
			res = lease.Result{Err: cmpErr(err, errRetryLater)}
			wait = w
		}
		if res.Err != nil {
			f.freeSlot() // not held while waiting
		}
		wait, stop := f.react(res.Err, wait, attempt, st)
		if stop || !f.pause(res.Err, wait, st) {
			return
		}
		res = f.nextAttempt(st)
	}
}

// followState is what a follower's attempts at its tick remember.
type followState struct {
	deadline     time.Time
	noQuorumWait time.Duration
	noQuorumCap  time.Duration
	lastTry      bool
	// A follower started on a full host was logged by its group.
	youngerLogged, fullLogged bool
	// runsElsewhere: the last refusal named another host running the
	// tick (givenUp then logs at debug level only).
	runsElsewhere bool
	// tries counts the acquisition attempts made (none yet for a follower
	// started on a full host): overlap skip applies to the first.
	tries int
	// skipped: overlap skip gave the tick up on this host, which only
	// watches the lease (skipOverlap); skipWait is the wait before the
	// next look.
	skipped  bool
	skipWait time.Duration
}

// newFollowState is the state of a follower whose first result is res.
func (f *follower) newFollowState(res lease.Result) *followState {
	deadline := f.j.DeadlineFor(f.tick)
	st := &followState{deadline: deadline, noQuorumWait: noQuorumFirst,
		noQuorumCap: max(noQuorumMax, deadline.Sub(f.tick)/noQuorumAttempts),
		fullLogged:  errors.Is(res.Err, errHostFull), tries: 1}
	if errors.Is(res.Err, errHostFull) {
		st.tries = 0
	}
	return st
}

// givenUp logs that the tick's deadline passed without this host running
// it, the last attempt having ended with err: normal (debug) while another
// host runs the tick, worth a warning when it was for want of a quorum.
func (f *follower) givenUp(err error, st *followState) {
	if st.skipped {
		f.log.Debug("tick deadline passed; stopped watching the skipped tick", "deadline", st.deadline.UTC().Format(time.RFC3339))
		return
	}
	if !st.runsElsewhere {
		f.missReason = missReason(err)
	}
	if st.runsElsewhere || errors.Is(err, errHostFull) {
		// Another host runs the tick, or this one stayed full (the
		// tick was logged as such when it started).
		f.log.Debug("tick deadline passed while another host runs the tick; stopped watching", "deadline", st.deadline.UTC().Format(time.RFC3339))
		return
	}
	f.log.Warn("tick deadline passed without running the tick; giving up", "deadline", st.deadline.UTC().Format(time.RFC3339), "last_err", err)
}

// react applies the loser rules to an attempt that ended with err (wait
// is won's when err is errRetryLater): how long to wait before the next
// attempt, or stop.
func (f *follower) react(err error, wait time.Duration, attempt int, st *followState) (time.Duration, bool) {
	s, j, log := f.s, f.j, f.log
	var rerr *lease.RefusedError
	switch {
	case errors.Is(err, errRetryLater):
		return wait, false // set by won
	case errors.Is(err, errSkipWatch):
		return st.skipWait, false // set by lookSkipped
	case errors.Is(err, errHostFull):
		// Look again soon: a slot may free up before the deadline.
		return heldRecheck, false
	case errors.Is(err, errTickDeadline):
		log.Warn("won the lease after the tick's deadline; not starting the job", "err", err)
		s.opts.Metrics.RunFinished(j.Name, "skipped", 0)
		f.missReason = MissOther
		return 0, true
	case errors.Is(err, lease.ErrEpochDone):
		s.opts.Metrics.Acquire(j.Name, "done")
		log.Debug("tick already completed")
		return 0, true
	case errors.As(err, &rerr) && errors.Is(rerr.Reason, lease.ErrHeld):
		s.opts.Metrics.Acquire(j.Name, "held")
		return f.held(rerr, attempt, st)
	case errors.Is(err, errShortValidity) || errors.Is(err, errStoreRead) || errors.Is(err, errPauseRead):
		log.Warn("the lease was won but the job could not start now; released it, retrying", "err", err, "retry_in", st.noQuorumWait)
		wait = st.noQuorumWait
		st.noQuorumWait = min(st.noQuorumWait*2, noQuorumMax)
		return wait, false
	case s.unvotable(err):
		s.giveUpUnvotable(f.ctx, f.tick, []string{j.Name}, err)
		f.missReason = MissDataYounger
		return 0, true
	case errors.Is(err, lease.ErrNoQuorum) || errors.Is(err, lease.ErrNotObtained):
		return f.noQuorum(err, &st.noQuorumWait, st.noQuorumCap, &st.youngerLogged), false
	default:
		s.opts.Metrics.Acquire(j.Name, "error")
		log.Error("acquire failed", "err", err)
		f.missReason = MissOther
		return 0, true
	}
}

// pause waits wait before the next attempt (the last attempt ended with
// err), shortened to one last try just before the deadline. It reports
// false when the follower should stop: the deadline passed, ctx ended or
// the job was paused.
func (f *follower) pause(err error, wait time.Duration, st *followState) bool {
	s := f.s
	if !s.now().Add(wait).Before(st.deadline) {
		if left := s.until(st.deadline) - lastTryMargin; left > 0 && !st.lastTry {
			wait, st.lastTry = left, true // one last try just before the deadline
		} else {
			f.givenUp(err, st)
			return false
		}
	}
	t := time.NewTimer(wait)
	select {
	case <-f.ctx.Done():
		t.Stop()
		return false
	case <-t.C:
	}
	if errors.Is(err, lease.ErrNoQuorum) && !s.test.unpaced && !s.retries.wait(f.ctx) {
		return false
	}
	if !s.now().Before(st.deadline) {
		f.givenUp(err, st)
		return false
	}
	if pi, ok := s.cachedPauses().paused(f.j.Name); ok {
		if st.skipped {
			return false // given up already: recorded as skipped for overlap
		}
		f.log.Info("job paused; no longer trying this tick", "paused_by", pi.By, "reason", pi.Reason)
		s.opts.Metrics.Skipped(f.j.Name, "paused")
		f.missReason = MissPaused
		return false
	}
	return true
}

// nextAttempt makes the next attempt at the tick, or returns errHostFull
// when this host runs max_parallel jobs already (it keeps watching while
// the deadline allows).
func (f *follower) nextAttempt(st *followState) lease.Result {
	s := f.s
	if st.skipped {
		return f.lookSkipped(st)
	}
	if !f.takeSlot() {
		if !st.fullLogged {
			st.fullLogged = true
			f.log.Info("this host runs max_parallel jobs already; not taking the tick now", "max_parallel", f.cfg.MaxParallel)
			s.opts.Metrics.Skipped(f.j.Name, "host_full")
		}
		return lease.Result{Err: errHostFull}
	}
	// Later attempts read the pause flags afresh before a run.
	f.pausesNow = func() (pauses, error) { return s.readPauses(f.ctx) }
	// One attempt: run applies the loser rules (and the deadline) between
	// attempts; a backend's Acquire would retry on its own until ctx ends.
	res := s.be.TryAcquireBatch(f.ctx, []lease.Request{s.request(f.cfg, f.j, f.tick)})[0]
	st.tries++
	if res.Err == nil {
		f.log.Info("took the tick over")
	}
	return res
}

// noQuorum counts and logs an attempt refused for lack of a quorum and
// returns the wait before the next: until a quorum votes again when the
// servers' voting state says when (servers in their restart guard: one
// info line for the host says when, debug lines per tick), else the
// doubling backoff *next up to limit, warned about on the first failure
// and then at the slowest pace.
func (f *follower) noQuorum(err error, next *time.Duration, limit time.Duration, youngerLogged *bool) time.Duration {
	s, log := f.s, f.log
	outcome := "no_quorum"
	if errors.Is(err, lease.ErrDataYounger) {
		// Servers that lost their data since the tick do not vote for
		// it: the tick may have completed and lost its mark with them.
		// Not running it (again) is the safe side.
		outcome = "data_younger"
		if !*youngerLogged {
			*youngerLogged = true
			log.Info("servers whose data is younger than the tick do not vote for it; the tick is not taken over unless a quorum that saw it answers",
				"err", err)
		}
	}
	s.opts.Metrics.Acquire(f.j.Name, outcome)
	if at := s.quorumVotingAt(f.ctx); time.Until(at) > 0 {
		wait := time.Until(at) + lease.Jitter(noQuorumFirst)
		log.Debug("no quorum for the job's lease until servers vote again; retrying then", "err", err, "retry_in", wait)
		return wait
	}
	// Warn on the first failure of the tick and then at the slowest
	// retry pace; the quick retries in between are debug lines.
	lvl := slog.LevelDebug
	if *next == noQuorumFirst || *next == limit {
		lvl = slog.LevelWarn
	}
	wait := *next
	log.Log(f.ctx, lvl, "no quorum for the job's lease; retrying", "err", err, "retry_in", wait)
	*next = min(*next*2, limit)
	return wait
}

var (
	// errRetryLater: the lease was won but released, to try again after
	// the wait won returned (a retry's backoff).
	errRetryLater = errors.New("released to retry later")
	// errStoreRead: the state a run needs (the retry state) could not be
	// read; the lease was released.
	errStoreRead = errors.New("could not read the job's retry state")
	// errPauseRead: the pause flags could not be read just before the
	// run; the lease was released.
	errPauseRead = errors.New("could not read the pause flags")
	// errHostFull: no attempt was made, the host's max_parallel slots
	// being taken.
	errHostFull = errors.New("this host runs max_parallel jobs already")
)

// cmpErr returns err, or dflt when err is nil.
func cmpErr(err, dflt error) error {
	if err != nil {
		return err
	}
	return dflt
}

// won handles a won lease l: it checks that the run may start, that the
// job is not paused and which attempt of the tick it is, then runs it.
// stop is true when the tick is over for this host; otherwise the lease
// was released and the tick is tried again: after wait (a retry's
// backoff) when err is nil, else by the rules for err (errShortValidity,
// errStoreRead: with the doubling backoff).
func (f *follower) won(l lease.Lease, deadline time.Time, first bool, lateBy time.Duration) (wait time.Duration, stop bool, err error) {
	s, j := f.s, f.j
	// The acquisition may have taken long (the daemon paused, the clock
	// stepped): check the deadline and the lease's remaining validity
	// once more, just before the job would start.
	mayStart := func() (stop bool, err error) {
		if err := s.mayStart(deadline, l); err != nil {
			s.release(l, f.log)
			if errors.Is(err, errTickDeadline) {
				f.log.Warn("won the lease after the tick's deadline; not starting the job", "err", err)
				s.opts.Metrics.RunFinished(j.Name, "skipped", 0)
				f.missReason = MissOther
				return true, nil
			}
			return false, err
		}
		return false, nil
	}
	if stop, err := mayStart(); stop || err != nil {
		return 0, stop, err
	}
	p, err := f.pausesNow()
	if err != nil {
		s.release(l, f.log)
		return 0, false, errors.Join(errPauseRead, err)
	}
	if pi, ok := p.paused(j.Name); ok {
		s.release(l, f.log)
		s.skipPaused(j, f.tick, pi)
		f.missReason = MissPaused
		return 0, true, nil
	}
	attempt, retryWhy := 1, ""
	if j.Retries > 0 {
		st, err := s.readRetry(f.ctx, j, f.tick, f.log)
		if err != nil {
			s.release(l, f.log)
			return 0, false, errors.Join(errStoreRead, err)
		}
		if st != nil {
			attempt = st.Attempt + 1
			switch at, why := f.retryStart(st, deadline); {
			case attempt > j.Retries+1:
				// Spent (retries was lowered by a reload): complete.
				f.log.Info("the tick's retries are spent; completing it", "attempts", st.Attempt)
				s.complete(l, f.log)
				return 0, true, nil
			case s.until(at) > 0:
				s.release(l, f.log)
				f.log.Debug("retry of the tick not due yet; released the lease", "attempt", attempt, "at", at.UTC().Format(time.RFC3339Nano), "why", why)
				return s.until(at), false, nil
			default:
				retryWhy = why
			}
		}
	}
	// The reads above may have taken a while: check once more.
	if stop, err := mayStart(); stop || err != nil {
		return 0, stop, err
	}
	if retryWhy != "" {
		f.log.Debug("retry of the tick due; taking it", "attempt", attempt, "why", retryWhy)
	}
	if first {
		s.opts.Metrics.TickDelay(j.Name, lateBy)
	}
	_, retryAt := s.runLeased(f.hard, f.cfg, j, f.tick, l, attempt, f.log)
	if retryAt.IsZero() {
		return 0, true, nil
	}
	// This host failed the attempt: others get the first chance at the
	// retry (see retryStart); this host tries when its turn comes, and
	// not before: a look at the lease earlier (won, found not due,
	// released) would hold it for a moment, and a host that saw it held
	// then would look again only at its TTL, past this host's turn. When
	// the last view of the hosts shows no other that may run the job, it
	// looks when the backoff ends, and retryStart decides then (reading
	// the heartbeats again first).
	f.freeSlot()
	turn := retryAt
	if later := retryAt.Add(s.otherHostsFirst()); later.Before(deadline.Add(-lastTryMargin)) && f.othersEligible() && !s.test.probeAtBackoff {
		turn = later
	}
	return max(s.until(turn), 0), false, nil
}

// takeSlot takes a run slot unless the follower has one; false when the
// host is full.
func (f *follower) takeSlot() bool {
	if !f.slot {
		f.slot = f.s.reserve(f.cfg, 1) == 1
	}
	return f.slot
}

// freeSlot gives the follower's run slot back, if it has one.
func (f *follower) freeSlot() {
	if f.slot {
		f.s.unreserve()
		f.slot = false
	}
}

// followTick follows (j, tick) from the first attempt's result res, as a
// follower that holds no run slot and checks the cached pause flags.
func (s *Scheduler) followTick(ctx, hard context.Context, cfg *Config, j *Job, tick time.Time, res lease.Result, lateBy time.Duration) {
	f := &follower{s: s, ctx: ctx, hard: hard, cfg: cfg, j: j, tick: tick,
		pausesNow: func() (pauses, error) { return s.cachedPauses(), nil }}
	f.run(res, lateBy)
}
