package scheduler

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// rankStagger is how much later than the host of rank r-1 the host of
// rank r of a job's candidates tries a tick: the backend's request
// timeout, between 10ms and 1s — long enough for the assigned host
// (rank 0) to have decided its batch, so that it usually wins and runs
// spread as the ranking says, and short enough that a dead assigned host
// delays the tick very little.
func (s *Scheduler) rankStagger() time.Duration {
	return min(max(s.be.Timeout(), 10*time.Millisecond), time.Second)
}

// fire plans one tick of jobs on this host: jobs paused, that this host
// may not run or for which it is not a candidate are left out; the others
// are tried in groups that share a start delay (the job's jitter plus the
// rank stagger), each group in one batch. Jobs for which this host stands
// by are followed by one standby loop (see standby).
func (s *Scheduler) fire(ctx, hard context.Context, wg *sync.WaitGroup, tick time.Time, jobs []*Job) {
	cfg := s.cfg.Load()
	pausesNow, live := s.unpaused(ctx, wg, tick, s.limitable(ctx, wg, tick, jobs))
	hosts := s.liveHosts(cfg)
	rk := s.rankFor(cfg, live, hosts)
	groups := map[time.Duration][]*Job{}
	var standby []*Job
	for _, j := range live {
		r := rk.rank[j.Name]
		switch {
		case r < 0:
			s.log.Debug("not eligible for the job on this host; not trying", "job", j.Name, "run_on", j.RunOn.String())
			if s.noEligibleHost(j) {
				s.noteMiss(ctx, wg, j, tick, MissNoEligibleHost)
			}
		case j.Candidates == 0:
			groups[j.JitterFor(tick)] = append(groups[j.JitterFor(tick)], j)
		case r < j.Candidates:
			d := (j.JitterFor(tick) + time.Duration(r)*s.rankStagger()).Truncate(time.Millisecond)
			groups[d] = append(groups[d], j)
		default:
			standby = append(standby, j)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(groups)) {
		g := groups[d]
		at := tick.Add(d)
		if d == 0 || s.until(at) <= 0 {
			s.tryGroup(ctx, hard, wg, cfg, tick, at, g, pausesNow)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !s.sleepUntil(ctx, at) {
				return
			}
			// Later than the tick (jitter): the config may have been
			// reloaded and the flags changed since.
			cfg := s.cfg.Load()
			g = slices.DeleteFunc(g, func(j *Job) bool { return cfg.Job(j.Name) == nil })
			pausesNow, g := s.unpaused(ctx, wg, tick, g)
			if len(g) > 0 {
				s.tryGroup(ctx, hard, wg, cfg, tick, at, g, pausesNow)
			}
		}()
	}
	if len(standby) > 0 && !s.test.noStandby {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.standby(ctx, hard, wg, tick, live, standby, rk)
		}()
	}
}

// unpaused starts a fresh read of the pause flags and returns it (as a
// function that waits for it) with the jobs that are not paused (the
// paused ones are noted to be recorded as skipped: see noteMiss). Jobs the
// last read says are paused wait for the fresh read (a resume just before
// the tick counts; if it fails, they stay skipped); the others go on at
// once and are checked against the fresh read when they win, before they
// start.
func (s *Scheduler) unpaused(ctx context.Context, wg *sync.WaitGroup, tick time.Time, jobs []*Job) (func() (pauses, error), []*Job) {
	pausesNow := s.pauseReader(ctx)
	p := s.cachedPauses()
	for _, j := range jobs {
		if _, ok := p.paused(j.Name); ok {
			if fresh, err := pausesNow(); err == nil {
				p = fresh
			}
			break
		}
	}
	live := make([]*Job, 0, len(jobs))
	for _, j := range jobs {
		if pi, ok := p.paused(j.Name); ok {
			s.skipPaused(j, tick, pi)
			s.noteMiss(ctx, wg, j, tick, MissPaused)
			continue
		}
		live = append(live, j)
	}
	return pausesNow, live
}

// standbyJob is a job this host stands by for, with its next look and
// how many looks it had.
type standbyJob struct {
	j     *Job
	next  time.Time
	looks int
}

// standbyReach is how many ranks of p's job may try the tick at p's look:
// 2×candidates; when widen (a fresh view in which max_parallel bounds
// some host, so that candidates may be busy), doubling at each later look
// and every eligible host at the last look before the deadline, so that a
// tick its busy candidates could not take is tried by every eligible host
// before its deadline. A host that finds the tick held or completed stops
// there: a tick costs each eligible host one attempt at most.
func (s *Scheduler) standbyReach(j *Job, tick time.Time, p standbyJob, widen bool) int {
	if s.test.standbyFixedReach || !widen {
		return 2 * j.Candidates
	}
	if !p.next.Add(j.StandbyAfter(tick)).Before(j.DeadlineFor(tick).Add(-lastTryMargin)) {
		return math.MaxInt
	}
	return 2 * j.Candidates << min(p.looks, 20)
}

// standby follows the jobs mine of tick (all: the tick's jobs that are not
// paused) for which this host stands by. At each job's standby time
// (tick + jitter + StandbyAfter) and then every StandbyAfter until its
// deadline, it tries the job if it ranks within standbyReach: at first
// the first standby hosts (ranks Candidates to 2×Candidates-1), at each
// later look twice as many ranks (and hosts that moved up because
// candidates left: a dead host's heartbeat expires after three
// heartbeats), at the last look before the deadline every eligible host. The ranking is computed
// again only when the live hosts changed; looks that try nothing send no
// request. A tick still held or completed is refused by the lease, so a
// standby host only runs a tick nobody took.
//
// atTick is the ranking of the tick's view. Without a fresh view (the
// heartbeats could not be read for three heartbeats) it keeps deciding:
// an unknown view must not turn every host that stood back at the tick
// into a standby host of every job (at 100 hosts × 10,000 jobs, a storm
// of attempts when the backend is likely overloaded already).
func (s *Scheduler) standby(ctx, hard context.Context, wg *sync.WaitGroup, tick time.Time, all, mine []*Job, atTick ranking) {
	pending := make([]standbyJob, 0, len(mine))
	for _, j := range mine {
		pending = append(pending, standbyJob{j: j, next: tick.Add(j.JitterFor(tick) + j.StandbyAfter(tick))})
	}
	rk := atTick
	rankedBy := s.liveHosts(s.cfg.Load())
	for len(pending) > 0 {
		at := pending[0].next
		for _, p := range pending[1:] {
			if p.next.Before(at) {
				at = p.next
			}
		}
		if !s.sleepUntil(ctx, at) {
			return
		}
		cfg := s.cfg.Load()
		hosts := s.liveHosts(cfg)
		switch {
		case s.test.standbyWithoutView: // the old ranking, for a negative control
			rk = rankJobs(all, hosts, s.host, cfg.Labels)
		case hosts != nil && (rk.rank == nil || !sameHosts(hosts, rankedBy)):
			rk, rankedBy = s.rankFor(cfg, all, hosts), hosts
		}
		now, paused := s.now(), s.cachedPauses()
		// Busy candidates exist only where max_parallel bounds a host; and
		// without a fresh view the ranks of the tick's view stay as they
		// were (no widening: see above).
		widen := slices.ContainsFunc(hosts, func(h HostBeat) bool { return h.MaxParallel > 0 })
		var try []*Job
		left := pending[:0]
		for _, p := range pending {
			j := p.j
			switch r, ok := rk.rank[j.Name]; {
			case p.next.After(now):
				left = append(left, p)
			case !now.Before(j.DeadlineFor(tick).Add(-lastTryMargin)) || cfg.Job(j.Name) == nil:
			case func() bool { _, ok := paused.paused(j.Name); return ok }():
			case ok && r >= 0 && r < s.standbyReach(j, tick, p, widen):
				try = append(try, j)
			default:
				p.next = p.next.Add(j.StandbyAfter(tick))
				p.looks++
				left = append(left, p)
			}
		}
		pending = left
		if len(try) > 0 {
			s.opts.Metrics.Standby(len(try))
			pausesNow, try := s.unpaused(ctx, wg, tick, try)
			if len(try) > 0 {
				s.tryGroup(ctx, hard, wg, cfg, tick, at, try, pausesNow)
			}
		}
	}
}

// sameHosts reports whether a and b name the same hosts with the same
// labels, in the same order.
func sameHosts(a, b []HostBeat) bool {
	return slices.EqualFunc(a, b, func(x, y HostBeat) bool { return x.Host == y.Host && maps.Equal(x.Labels, y.Labels) })
}

// tryGroup reserves run slots (max_parallel) for jobs, makes one batch
// attempt for those that got one, and follows each up in its own
// goroutine. Jobs that found the host full are followed too, without an
// attempt: each tries when a slot frees up before its deadline (unless
// the tick was taken meanwhile), logged in one line for the group.
func (s *Scheduler) tryGroup(ctx, hard context.Context, wg *sync.WaitGroup, cfg *Config, tick, at time.Time, jobs []*Job, pausesNow func() (pauses, error)) {
	n := s.reserve(cfg, len(jobs))
	if full := jobs[n:]; len(full) > 0 && s.test.dropWhenFull {
		for _, j := range full {
			s.opts.Metrics.Skipped(j.Name, "host_full")
		}
	} else if len(full) > 0 {
		names := make([]string, 0, min(len(full), 20))
		for _, j := range full {
			if len(names) < cap(names) {
				names = append(names, j.Name)
			}
			s.opts.Metrics.Skipped(j.Name, "host_full")
			wg.Add(1)
			go func() {
				defer wg.Done()
				f := &follower{s: s, ctx: ctx, hard: hard, wg: wg, cfg: cfg, j: j, tick: tick, pausesNow: pausesNow}
				f.run(lease.Result{Err: errHostFull}, -s.until(at))
			}()
		}
		s.log.Info("this host runs max_parallel jobs already; following the tick, to try it if a slot frees up before its deadline",
			"tick", tick.UTC().Format(time.RFC3339), "jobs", len(full), "first_jobs", names, "max_parallel", cfg.MaxParallel)
	}
	jobs = jobs[:n]
	if len(jobs) == 0 {
		return
	}
	reqs := make([]lease.Request, len(jobs))
	for i, j := range jobs {
		reqs[i] = s.request(cfg, j, tick)
	}
	lateBy := -s.until(at)
	// The trace of a tick's way to its job starts (debug lines: trying
	// the tick, tick decided, starting the job); the tick is formatted
	// only when debug logging is on.
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	if debug {
		s.log.Debug("trying the tick", "tick", tick.UTC().Format(time.RFC3339), "jobs", len(reqs))
	}
	results := s.be.TryAcquireBatch(ctx, reqs)
	if debug {
		won := 0
		for _, r := range results {
			if r.Err == nil && r.Lease != nil {
				won++
			}
		}
		s.log.Debug("tick decided", "tick", tick.UTC().Format(time.RFC3339), "jobs", len(reqs), "won", won)
	}
	var unvotable []string
	var unvotableErr error
	for i, j := range jobs {
		j, res := j, results[i]
		if s.unvotable(res.Err) {
			s.unreserve()
			unvotable, unvotableErr = append(unvotable, j.Name), res.Err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &follower{s: s, ctx: ctx, hard: hard, wg: wg, cfg: cfg, j: j, tick: tick, slot: true, pausesNow: pausesNow}
			f.run(res, lateBy)
		}()
	}
	if len(unvotable) > 0 {
		s.giveUpUnvotable(ctx, tick, unvotable, unvotableErr)
		for _, j := range jobs {
			if slices.Contains(unvotable, j.Name) {
				s.noteMiss(ctx, wg, j, tick, MissDataYounger)
			}
		}
	}
}

// request is the lease request of tick of j from this host.
func (s *Scheduler) request(cfg *Config, j *Job, tick time.Time) lease.Request {
	return lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)}
}

// skipPaused logs and counts a tick of a paused job that is not run.
func (s *Scheduler) skipPaused(j *Job, tick time.Time, pi PauseInfo) {
	s.log.Info("job paused; skipping the tick", "job", j.Name, "tick", tick.UTC().Format(time.RFC3339),
		"paused_by", pi.By, "paused_at", pi.At.UTC().Format(time.RFC3339), "reason", pi.Reason)
	s.opts.Metrics.Skipped(j.Name, "paused")
}

// pauseReader starts a read of the pause flags and returns a function
// that waits for it (at most requestWait) and returns its result.
func (s *Scheduler) pauseReader(ctx context.Context) func() (pauses, error) {
	type read struct {
		p   pauses
		err error
	}
	done := make(chan read, 1)
	go func() {
		p, err := s.readPauses(ctx)
		done <- read{p, err}
	}()
	var once sync.Once
	var r read
	return func() (pauses, error) {
		once.Do(func() { r = <-done })
		return r.p, r.err
	}
}

// sleepUntil waits until t on the scheduler's clock; false if ctx ended.
func (s *Scheduler) sleepUntil(ctx context.Context, t time.Time) bool {
	d := s.until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// reserve takes up to n run slots of max_parallel and returns how many it
// got (n when there is no bound).
func (s *Scheduler) reserve(cfg *Config, n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg.MaxParallel > 0 {
		n = max(min(n, cfg.MaxParallel-s.slots), 0)
	}
	s.slots += n
	return n
}

// unreserve gives a run slot back.
func (s *Scheduler) unreserve() {
	s.mu.Lock()
	s.slots--
	s.mu.Unlock()
}
