package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// maxPendingMisses bounds the ticks of one job waiting on a host to be
// recorded missed: a host that cannot reach a quorum for long notes a
// miss every tick, and each waits up to missedRecordFor.
const maxPendingMisses = 64

// missQueue holds, per job, the ticks this host noted missed and has not
// recorded yet, and runs one recorder goroutine per job with any.
type missQueue struct {
	mu   sync.Mutex
	jobs map[string]*jobMisses
}

// jobMisses are the pending ticks of one job, by Unix time.
type jobMisses struct {
	ticks map[int64]pendingMiss
}

// pendingMiss is a tick noted missed, with the job as it was then.
type pendingMiss struct {
	job    *Job
	tick   time.Time
	reason string
}

func newMissQueue() *missQueue { return &missQueue{jobs: map[string]*jobMisses{}} }

// note adds tick of j (first reason noted wins) and starts the job's
// recorder (owned by wg, stopped by ctx) unless it runs. Beyond
// maxPendingMisses pending ticks of the job, the tick is logged and
// dropped.
func (q *missQueue) note(s *Scheduler, ctx context.Context, wg *sync.WaitGroup, j *Job, tick time.Time, reason string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	jm := q.jobs[j.Name]
	start := jm == nil
	if start {
		jm = &jobMisses{ticks: map[int64]pendingMiss{}}
		q.jobs[j.Name] = jm
	}
	if _, ok := jm.ticks[tick.Unix()]; ok {
		return
	}
	if len(jm.ticks) >= maxPendingMisses {
		s.log.Error("too many missed ticks waiting to be recorded; this host does not record this one",
			"job", j.Name, "tick", tick.UTC().Format(time.RFC3339), "reason", reason, "pending", maxPendingMisses)
		return
	}
	jm.ticks[tick.Unix()] = pendingMiss{job: j, tick: tick, reason: reason}
	if start {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.recordMisses(ctx, j.Name)
		}()
	}
}

// next returns the oldest pending tick of job; ok is false (and the
// job's recorder is to end) when there is none.
func (q *missQueue) next(job string) (pendingMiss, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	jm := q.jobs[job]
	var best pendingMiss
	found := false
	for k, m := range jm.ticks {
		if !found || k < best.tick.Unix() {
			best, found = m, true
		}
	}
	if !found {
		delete(q.jobs, job)
	}
	return best, found
}

// done drops tick of job from the pending ones.
func (q *missQueue) done(job string, tick time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if jm := q.jobs[job]; jm != nil {
		delete(jm.ticks, tick.Unix())
	}
}

// drop forgets job's pending ticks (its recorder ends with ctx).
func (q *missQueue) drop(job string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.jobs, job)
}

// recordMisses is the recorder of job: oldest first, it waits for each
// pending tick's deadline, then records it as missed unless another host
// did or the tick ran, retrying (no quorum, the guard held) for up to
// missedRecordFor after the deadline.
func (s *Scheduler) recordMisses(ctx context.Context, job string) {
	defer func() {
		if ctx.Err() != nil {
			s.misses.drop(job)
		}
	}()
	backoff := time.Second
	for ctx.Err() == nil {
		m, ok := s.misses.next(job)
		if !ok {
			return
		}
		deadline := m.job.DeadlineFor(m.tick)
		if !s.sleepUntil(ctx, deadline.Add(s.missedMargin())) {
			return
		}
		log := s.log.With("job", job, "tick", m.tick.UTC().Format(time.RFC3339), "reason", m.reason)
		done, err := s.tryRecordMiss(ctx, m.job, m.tick, m.reason, log)
		if done {
			s.misses.done(job, m.tick)
			backoff = time.Second
			continue
		}
		// Held: by a host checking a tick now (it may die), or no quorum:
		// back off.
		wait := heldBy(err)
		if wait == 0 {
			wait, backoff = lease.Jitter(backoff), min(2*backoff, 10*time.Second)
		}
		if giveUp := deadline.Add(missedRecordFor); !time.Now().Add(wait).Before(giveUp) {
			log.Error("could not record the missed tick", "err", err, "tried_for", missedRecordFor)
			s.misses.done(job, m.tick)
			continue
		}
		log.Debug("could not record the missed tick yet; retrying", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
