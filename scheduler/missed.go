package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// A tick whose deadline passes without a run gets one record in the job's
// history (result "missed", or "skipped" for a paused job or a tick the
// previous run still held), with the reason, written by one host of the
// fleet:
//
//   - Every host that saw why the tick could not run on it (it found no
//     quorum, no eligible host, every slot full, the job paused...) notes
//     the reason (noteMiss). A host that saw the tick run elsewhere notes
//     nothing, so a healthy fleet spends nothing on this.
//   - Just after the deadline, each such host takes the job's missed
//     guard (see guard.go: a mutex "JOB@missed" without epoch, and a done
//     mark JOB.missed.<unix tick> per tick). Under the mutex, unless the
//     tick's mark is stored, it checks that the tick has no run (its
//     lease is neither completed nor held for it, and the job's runs
//     have no record of it), appends the record to the job's log of
//     missed ticks (its ID is the tick's, so a repeated append changes
//     nothing; ReadHistory merges it with the runs), counts it
//     (leasecron_ticks_missed_total), fires on_missed, writes the mark
//     and releases the mutex: the others find the mark and stop. Ticks
//     may be recorded in any order.
//   - A host that cannot reach a quorum keeps trying, with a backoff, for
//     missedRecordFor after the deadline: a tick missed for want of a
//     quorum is recorded once the quorum is back.
//   - One recorder goroutine per job does this on a host, for its pending
//     ticks oldest first; at most maxPendingMisses ticks of a job wait on
//     a host, a further one is not recorded by this host (logged).

// Reasons a tick was missed or skipped (RunRecord.Reason, the reason
// label of leasecron_ticks_missed_total).
const (
	MissNoQuorum       = "no_quorum"        // too few servers answered or voted
	MissNoEligibleHost = "no_eligible_host" // no live host matches run_on (see noEligibleHost)
	MissAllFull        = "all_full"         // every candidate ran max_parallel jobs
	MissDataYounger    = "data_younger"     // the servers lost their data since the tick
	MissPaused         = "paused"           // skipped: the job was paused
	MissOverlap        = "overlap"          // skipped: the previous run still held the lease (overlap: skip)
	MissCannotLimit    = "cannot_limit"     // no host could apply the job's limits
	MissOther          = "other"            // any other failure to acquire
)

// missedRecordFor bounds how long after a tick's deadline a host keeps
// trying to record it missed (the backend unreachable meanwhile).
const missedRecordFor = time.Hour

// missedMargin is how long after a tick's deadline its miss is checked: a
// run that won the lease just before the deadline has started by then.
func (s *Scheduler) missedMargin() time.Duration { return time.Second + 2*s.be.Timeout() }

// missKey is the lease key of the mutex that guards the missed records
// of job's ticks (see guard.go).
func (s *Scheduler) missKey(job string) string { return s.key(job) + "@missed" }

// skippedReason reports whether a tick missed for reason is recorded as
// skipped (by the operator's or the job's own choice) rather than missed.
func skippedReason(reason string) bool { return reason == MissPaused || reason == MissOverlap }

// noteMiss notes that this host saw tick of j not run here for reason:
// once the deadline passed, the tick is recorded as missed by one host of
// the fleet unless it ran. It returns at once; the work is done by the
// job's recorder (see missQueue).
func (s *Scheduler) noteMiss(ctx context.Context, wg *sync.WaitGroup, j *Job, tick time.Time, reason string) {
	s.misses.note(s, ctx, wg, j, tick, reason)
}

// tryRecordMiss makes one attempt at recording tick of j missed; done is
// false when it is to be tried again (err says why).
func (s *Scheduler) tryRecordMiss(ctx context.Context, j *Job, tick time.Time, reason string, log *slog.Logger) (done bool, err error) {
	name := s.doneName(j.Name, "missed", tick)
	if !s.noMissGuard {
		owner := "missed tick=" + strconv.FormatInt(tick.Unix(), 10) + " host=" + s.host
		req := lease.Request{Key: s.missKey(j.Name), TTL: s.cfg.Load().Lease.TTL, Owner: owner}
		res := s.be.TryAcquireBatch(ctx, []lease.Request{req})[0]
		if res.Err != nil {
			return false, res.Err // held by a host checking a tick now, or no quorum
		}
		defer s.release(res.Lease, log)
		recorded, err := s.isDone(ctx, name)
		if err != nil || recorded {
			return recorded, err
		}
	}
	ran, err := s.tickRan(ctx, j, tick, log)
	if err != nil {
		return false, err
	}
	if !ran {
		if err := s.recordMiss(ctx, j, tick, reason, log); err != nil {
			return false, err
		}
	}
	if !s.noMissGuard {
		_ = s.markDone(ctx, name, log) // logged; the record's append is idempotent
	}
	return true, nil
}

// recordMiss appends tick's missed (or skipped) record, counts it and
// fires on_missed. A record already there — appended by a host whose
// answer was lost, or that died before the tick's done mark — is not
// appended or counted again, but the hook is still fired: its own guard
// and done mark keep it to one delivery.
func (s *Scheduler) recordMiss(ctx context.Context, j *Job, tick time.Time, reason string, log *slog.Logger) error {
	recorded, err := s.missRecorded(ctx, j, tick)
	if err != nil {
		return err
	}
	result := "missed"
	if skippedReason(reason) {
		result = "skipped"
	}
	if !recorded {
		if err := s.appendMiss(ctx, j, tick, reason); err != nil {
			return err
		}
		log.Warn("tick recorded as "+result, "deadline", j.DeadlineFor(tick).UTC().Format(time.RFC3339))
		s.opts.Metrics.TickMissed(j.Name, reason)
	}
	if !skippedReason(reason) {
		s.fireHook(j, HookEvent{Event: EventMissed, Job: j.Name, Tick: tick.UTC(), Result: result, Reason: reason})
	}
	return nil
}

// missRecorded reports whether tick of j is on record as missed or
// skipped already. The records are small.
func (s *Scheduler) missRecorded(ctx context.Context, j *Job, tick time.Time) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	missed, err := s.be.Log(rctx, s.missLogName(j.Name), min(max(j.HistoryLimit, 1), 100))
	if err != nil {
		return false, err
	}
	for _, r := range missed {
		if r.ID == missID(tick) {
			return true, nil
		}
	}
	return false, nil
}

// tickRan reports whether tick of j ran (or runs) somewhere: its lease is
// completed for it or held for it, or the job's runs have a record of it
// (a run cut short, a failure to start; a run of it whose completion a
// later tick's overwrote). A later tick's completion or run says nothing
// of this one: a store that answers again only after the next tick ran
// still gets the miss on record — when the records read reach back past
// the tick. Only the newest records that can hold the tick's runs are
// read (see runsSince); when as many were read as asked for and none
// started before the tick (a host that comes back after more runs than
// history_limit, or after many retries and manual runs), the tick's
// record may have left the log, and it counts as ran rather than be
// recorded missed on no evidence.
func (s *Scheduler) tickRan(ctx context.Context, j *Job, tick time.Time, log *slog.Logger) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	info, err := s.be.Inspect(rctx, s.key(j.Name))
	if err != nil {
		return false, err
	}
	ht, _, held := parseOwner(info.Holder)
	if info.DoneEpoch == tick.Unix() || held && ht == tick.Unix() {
		return true, nil
	}
	n := s.runsSince(j, tick)
	recs, err := s.be.Log(rctx, s.logName(j.Name), n)
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		var rec RunRecord
		if json.Unmarshal(r.Data, &rec) == nil && rec.Tick.Unix() == tick.Unix() && !rec.Tick.IsZero() {
			return true, nil
		}
	}
	if len(recs) == n && !recs[len(recs)-1].At.Before(tick) {
		log.Info("the run records read do not reach back to this tick; not recording it missed",
			"records_read", n)
		return true, nil
	}
	return false, nil
}

// runsSince bounds the records of j's runs logged since tick's first
// attempt: up to retries+1 attempts per tick from tick to now, twice
// over for runs whose completion was not confirmed and manual runs,
// plus one that could not start per live host, plus a few; at most
// history_limit and 100.
func (s *Scheduler) runsSince(j *Job, tick time.Time) int {
	ticks, now := 1, s.now()
	for t := j.Next(tick); !t.IsZero() && !t.After(now) && ticks < 100; t = j.Next(t) {
		ticks++
	}
	hosts := len(s.liveHosts(s.cfg.Load()))
	return min(max(j.HistoryLimit, 1), 100, 2*ticks*(j.Retries+1)+hosts+4)
}

// missID is the history record ID of tick's missed record: one per tick.
func missID(tick time.Time) string { return strconv.FormatInt(tick.Unix(), 10) + ".missed" }

// appendMiss appends the missed (or skipped) record of tick of j.
func (s *Scheduler) appendMiss(ctx context.Context, j *Job, tick time.Time, reason string) error {
	result := "missed"
	if skippedReason(reason) {
		result = "skipped"
	}
	rec := RunRecord{Job: j.Name, Host: s.host, Tick: tick.UTC(), Start: tick.UTC(), End: tick.UTC(), Result: result, Reason: reason}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.requestWait())
	defer cancel()
	return s.be.Append(rctx, s.missLogName(j.Name), lease.Record{ID: missID(tick), At: tick, Data: data}, max(j.HistoryLimit, 1))
}

// noEligibleHost reports whether the last heartbeat read lists no host
// that may run j, however old the read; false before the first one. A
// host that may not run j notes j's tick missed on that ground (the hosts
// that may run it note their own misses). A stale read counts, so that a
// tick whose deadline passed while the store did not answer (and the
// heartbeats went unread) is still recorded. Nothing is recorded for a
// tick that ran: the recorder checks first (tickRan). What a stale read
// can get wrong is the reason: a host that may run j and started after
// this host's last read notes its own (no_quorum, say) — whichever host
// takes the missed guard first writes the record.
func (s *Scheduler) noEligibleHost(j *Job) bool {
	v := s.view.Load()
	if s.test.freshViewOnly && v != nil && time.Since(v.read) > beatTTL(s.cfg.Load()) {
		return false
	}
	return v != nil && !anyEligible(j, v.hosts)
}

// anyEligible reports whether a host of hosts may run j.
func anyEligible(j *Job, hosts []HostBeat) bool {
	for _, h := range hosts {
		if j.RunOn.Eligible(h.Host, h.Labels) {
			return true
		}
	}
	return false
}

// missReason maps the last refusal a host got for a tick it gave up to
// the reason of the miss.
func missReason(err error) string {
	switch {
	case errors.Is(err, errHostFull):
		return MissAllFull
	case errors.Is(err, lease.ErrDataYounger):
		return MissDataYounger
	case errors.Is(err, lease.ErrNoQuorum):
		return MissNoQuorum
	}
	return MissOther
}
