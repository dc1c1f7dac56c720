package scheduler

import (
	"errors"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/lease"
)

// The loser rules for a key held by another run: watch a holder of the
// tick, skip for a newer tick, apply the job's overlap policy for an older
// one, and the watch of a tick skipped for overlap.

// errSkipWatch: the follower gave the tick up (overlap: skip) and looked
// at the job's lease without taking it; it looks again after skipWait.
var errSkipWatch = errors.New("skipped tick: watching the lease")

// held applies the loser rules to a refusal because the key is held:
// watch a holder of this tick, skip for a newer tick, and for an older
// one apply the job's overlap policy.
func (f *follower) held(rerr *lease.RefusedError, attempt int, st *followState) (time.Duration, bool) {
	s, j, tick, log := f.s, f.j, f.tick, f.log
	ht, hh, ok := parseOwner(rerr.Holder)
	switch {
	case rerr.Holder == "":
		// Taken by a request that ran at the same moment (the refusal
		// could not read its owner): look again soon, as a loser that saw
		// the holder of this tick would.
		st.runsElsewhere = true
		return min(max(rerr.HolderTTL, splitRetryBase), heldRecheck) + time.Millisecond, false
	case ok && ht == tick.Unix():
		// Another host runs this tick: watch for it to vanish, waking
		// when its lease would expire.
		st.runsElsewhere = hh != s.host
		if attempt == 0 {
			log.Debug("tick running on another host; watching for takeover", "holder", hh, "ttl", rerr.HolderTTL)
		}
		return heldWait(rerr, s.be.Quorum(), attempt), false
	case ok && ht > tick.Unix():
		log.Info("a newer tick is already running; skipping this one", "holder_tick", time.Unix(ht, 0).UTC().Format(time.RFC3339), "holder", hh)
		return 0, true
	default:
		// An older tick (or a manual run) still holds the job. overlap:
		// skip applies to the tick's first attempt; a tick already under
		// way (a retry, a takeover) waits.
		if j.Overlap != config.OverlapWait && st.tries == 1 {
			return f.skipOverlap(rerr, st)
		}
		if st.tries == 1 {
			log.Info("previous run still holds the lease; waiting (overlap: wait)", "holder", rerr.Holder)
		}
		return min(rerr.HolderTTL+5*time.Millisecond, time.Second), false
	}
}

// skipOverlap applies overlap: skip to a tick whose first attempt found an
// older tick's run (or a manual run) holding the job's lease: this host
// gives the tick up, but watches the lease until the deadline without
// taking it, in case another host starts the tick — one whose first
// attempt came after that run ended. It then follows the tick as any
// loser does, and takes it over should that host die; without the watch,
// a tick whose only runner died would be lost. It returns the wait before
// the first look (stop: not watching).
func (f *follower) skipOverlap(rerr *lease.RefusedError, st *followState) (wait time.Duration, stop bool) {
	f.log.Warn("previous run still holds the lease; skipping this tick (overlap: skip)", "holder", rerr.Holder)
	f.s.opts.Metrics.RunFinished(f.j.Name, "skipped", 0)
	f.missReason = MissOverlap
	st.skipped = true
	return f.skipLookWait(rerr.HolderTTL), f.s.test.skipStops
}

// skipLookWait is the wait before the next look at the lease of a skipped
// tick, held for holderTTL more (0: free). Half a TTL at most: a host that
// started the tick and died leaves its lease held for more than that after
// its last renewal, so no such lease goes unseen.
func (f *follower) skipLookWait(holderTTL time.Duration) time.Duration {
	half := f.cfg.Lease.TTL / 2
	if holderTTL > 0 {
		return min(holderTTL+5*time.Millisecond, half)
	}
	return half
}

// lookSkipped reads the lease of a tick skipped on this host: errSkipWatch
// while no other host has started the tick; the refusal a held lease would
// give once one has (the follower then follows it as a loser); and
// ErrEpochDone once the tick (or a newer one) completed. A free lease
// whose tick awaits a retry another host left (retryPending) also ends the
// watch: this host follows the tick from its next attempt.
func (f *follower) lookSkipped(st *followState) lease.Result {
	s := f.s
	info, err := s.be.Inspect(f.ctx, s.key(f.j.Name))
	if err != nil {
		f.log.Debug("could not read the lease of the skipped tick; looking again", "err", err)
		st.skipWait = f.skipLookWait(0)
		return lease.Result{Err: errSkipWatch}
	}
	if info.DoneEpoch >= f.tick.Unix() {
		return lease.Result{Err: lease.ErrEpochDone}
	}
	// A holder on fewer servers than a quorum (Redlock's nodes may
	// disagree) has not started anything: keep watching.
	ht, hh, ok := parseOwner(info.Holder)
	if ok && ht >= f.tick.Unix() && info.HolderNodes >= s.be.Quorum() {
		if ht == f.tick.Unix() {
			f.log.Info("the skipped tick was started by another host; following it, to take it over if that host dies", "holder", hh)
			st.skipped = false
			f.missReason = ""
		}
		return lease.Result{Err: &lease.RefusedError{Key: s.key(f.j.Name), Reason: lease.ErrHeld,
			Holder: info.Holder, HolderTTL: info.TTL, HolderNodes: info.HolderNodes}}
	}
	if info.Holder == "" && f.retryPending(st) {
		return lease.Result{Err: errSkipWatch}
	}
	st.skipWait = f.skipLookWait(info.TTL)
	return lease.Result{Err: errSkipWatch}
}

// retryPending reports, for a skipped tick whose lease is free, whether
// another host started the tick, saw its attempt fail and left a retry to
// the fleet (the lease is free between attempts, so a look at the lease
// alone misses it). Then this host follows the tick as any loser does and
// may take the retry when its backoff ends: the failed host waits
// otherHostsFirst longer for that. A job without retries has no retry
// state, and the last look before the deadline leaves no time for a run,
// so neither reads it. A retry state that cannot be read is looked for
// again at the next look.
func (f *follower) retryPending(st *followState) bool {
	if f.j.Retries == 0 || st.lastTry {
		return false
	}
	rs, err := f.s.readRetry(f.ctx, f.j, f.tick, f.log)
	if err != nil {
		f.log.Debug("could not read the retry state of the skipped tick; looking again", "err", err)
		return false
	}
	if rs == nil {
		return false
	}
	f.log.Info("the skipped tick was started by another host, whose attempt failed; following it, to take the retry",
		"failed_on", rs.Host, "attempt", rs.Attempt)
	st.skipped, st.skipWait = false, 0
	f.missReason = ""
	return true
}
