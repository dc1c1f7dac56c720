package scheduler

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/leasecron/leasecron/backend"
)

// rankStagger is how much later than the host of rank r-1 the host of
// rank r of a job's candidates tries a tick: about one acquisition round,
// so that the assigned host (rank 0) usually wins and runs spread as the
// ranking says.
const rankStagger = 10 * time.Millisecond

// fire plans one tick of jobs on this host: jobs paused (as of the last
// read of the flags), that this host may not run or for which it is not a
// candidate are left out; the others are tried in groups that share a
// start delay (the job's jitter plus the rank stagger), each group in one
// batch. Jobs for which this host stands by are tried at the tick's
// standby time (see rank.go).
func (s *Scheduler) fire(ctx, hard context.Context, wg *sync.WaitGroup, tick time.Time, jobs []*Job) {
	cfg := s.cfg.Load()
	// The flags are read again while the batch is acquired: a job paused
	// since the last read is released, not run, when it wins.
	pausesNow := s.pauseReader(ctx)
	cached := s.cachedPauses()
	var live []*Job
	for _, j := range jobs {
		if pi, ok := cached.paused(j.Name); ok {
			s.skipPaused(j, tick, pi)
			continue
		}
		live = append(live, j)
	}
	rk := rankJobs(live, s.liveHosts(cfg), s.host, cfg.Labels)
	groups := map[time.Duration][]*Job{}
	byStandby := map[time.Duration][]*Job{}
	for _, j := range live {
		r := rk.rank[j.Name]
		switch {
		case r < 0:
			s.log.Debug("not eligible for the job on this host; not trying", "job", j.Name, "run_on", j.RunOn.String())
		case j.Candidates == 0:
			groups[j.JitterFor(tick)] = append(groups[j.JitterFor(tick)], j)
		case r < j.Candidates:
			d := (j.JitterFor(tick) + time.Duration(r)*rankStagger).Truncate(time.Millisecond)
			groups[d] = append(groups[d], j)
		default:
			d := (j.JitterFor(tick) + j.StandbyAfter(tick)).Truncate(time.Millisecond)
			byStandby[d] = append(byStandby[d], j)
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
			if s.sleepUntil(ctx, at) {
				s.tryGroup(ctx, hard, wg, cfg, tick, at, g, pausesNow)
			}
		}()
	}
	for d, g := range byStandby {
		at := tick.Add(d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.sleepUntil(ctx, at) {
				s.standby(ctx, hard, wg, tick, at, g, rk)
			}
		}()
	}
}

// standby tries the jobs of tick for which this host stands by, at their
// standby time: those it ranks within twice their Candidates by a fresh
// view of the hosts (the first standby hosts, and hosts that became
// candidates because others left). A tick still held or completed is
// refused by the lease, so a standby host only runs a tick nobody took.
//
// When there is no fresh view now (the heartbeats could not be read for
// three heartbeats), the ranks of the tick's view, atTick, decide: an
// unknown view must not turn every host that stood back at the tick into
// a standby host of every job (with 100 hosts and 10,000 jobs, a storm of
// up to a million attempts at the standby time, when the backend is
// likely overloaded already).
func (s *Scheduler) standby(ctx, hard context.Context, wg *sync.WaitGroup, tick, at time.Time, jobs []*Job, atTick ranking) {
	cfg := s.cfg.Load()
	p := s.refreshPauses(ctx)
	var live []*Job
	for _, j := range jobs {
		if pi, ok := p.paused(j.Name); ok {
			s.skipPaused(j, tick, pi)
			continue
		}
		live = append(live, j)
	}
	rk := atTick
	if hosts := s.liveHosts(cfg); hosts != nil || s.standbyWithoutView {
		rk = rankJobs(live, hosts, s.host, cfg.Labels)
	}
	var try []*Job
	for _, j := range live {
		if r := rk.rank[j.Name]; r >= 0 && r < 2*j.Candidates {
			try = append(try, j)
		}
	}
	if len(try) > 0 {
		s.opts.Metrics.Standby(len(try))
		s.tryGroup(ctx, hard, wg, cfg, tick, at, try, func() pauses { return p })
	}
}

// tryGroup reserves run slots (max_parallel) for jobs, makes one batch
// attempt for those that got one, and follows each up in its own
// goroutine. Jobs that found the host full are left to other hosts.
func (s *Scheduler) tryGroup(ctx, hard context.Context, wg *sync.WaitGroup, cfg *Config, tick, at time.Time, jobs []*Job, pausesNow func() pauses) {
	n := s.reserve(cfg, len(jobs))
	for _, j := range jobs[n:] {
		s.log.Info("this host runs max_parallel jobs already; leaving the tick to other hosts",
			"job", j.Name, "tick", tick.UTC().Format(time.RFC3339), "max_parallel", cfg.MaxParallel)
		s.opts.Metrics.Skipped(j.Name, "host_full")
	}
	jobs = jobs[:n]
	if len(jobs) == 0 {
		return
	}
	reqs := make([]backend.Request, len(jobs))
	for i, j := range jobs {
		reqs[i] = s.request(cfg, j, tick)
	}
	lateBy := -s.until(at)
	results := s.be.TryAcquireBatch(ctx, reqs)
	for i, j := range jobs {
		j, res := j, results[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &follower{s: s, ctx: ctx, hard: hard, cfg: cfg, j: j, tick: tick, slot: true, pausesNow: pausesNow}
			f.run(res, lateBy)
		}()
	}
}

// request is the lease request of tick of j from this host.
func (s *Scheduler) request(cfg *Config, j *Job, tick time.Time) backend.Request {
	return backend.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)}
}

// skipPaused logs and counts a tick of a paused job that is not run.
func (s *Scheduler) skipPaused(j *Job, tick time.Time, pi PauseInfo) {
	s.log.Info("job paused; skipping the tick", "job", j.Name, "tick", tick.UTC().Format(time.RFC3339),
		"paused_by", pi.By, "paused_at", pi.At.UTC().Format(time.RFC3339), "reason", pi.Reason)
	s.opts.Metrics.Skipped(j.Name, "paused")
}

// pauseReader starts a read of the pause flags and returns a function
// that waits for it (at most requestWait; then, or on error, the last
// read is used).
func (s *Scheduler) pauseReader(ctx context.Context) func() pauses {
	done := make(chan pauses, 1)
	go func() { done <- s.refreshPauses(ctx) }()
	var once sync.Once
	var p pauses
	return func() pauses {
		once.Do(func() { p = <-done })
		return p
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
