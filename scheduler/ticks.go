package scheduler

import (
	"cmp"
	"container/heap"
	"context"
	"slices"
	"time"
)

// loop computes every job's next tick and hands each batch of jobs that
// share a tick to fire. It returns when ctx is done. The pending ticks
// wait in a heap (tickQueue): a wake looks at the earliest one only.
//
// A tick is never fired after its deadline. When the loop wakes late for a
// pending tick (the daemon was paused, the host suspended, or the clock
// stepped forward), ticks that were overtaken by a later one or whose
// deadline passed are dropped: the loop attempts only the latest tick,
// Prev(now), if its deadline has not passed yet, and otherwise goes on
// with Next(now). Waits are capped at clockRecheck so that a clock step is
// noticed even while a tick is far ahead. When the clock steps back, the
// pending tick stays pending until the clock reaches it again.
func (s *Scheduler) loop(ctx context.Context, fire func(tick time.Time, jobs []*Job)) {
	cfg := s.cfg.Load()
	q := newTickQueue(cfg, s.pendingTicks(cfg, nil, true))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var dueFor time.Time // the tick due was computed for
	var due []*Job
	for {
		at := q.earliest()
		recheck := cmp.Or(s.test.recheck, clockRecheck)
		wait := recheck
		var offset time.Duration
		if !at.IsZero() {
			if !dueFor.Equal(at) || due == nil {
				dueFor, due = at, q.due(at)
			}
			if s.until(at) > warmAhead {
				// Before the wait is computed: a ranking not yet
				// computed takes time (10 ms for 10,000 jobs × 100 hosts).
				s.warmRanking(cfg, due)
			}
			offset = s.tickOffset(cfg, due, at)
			wait = min(max(s.until(at)+offset, 0), recheck)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.reload:
			cfg = s.cfg.Load()
			q = newTickQueue(cfg, s.pendingTicks(cfg, q.at, false))
			due = nil
			s.log.Info("schedule reloaded", "jobs", len(cfg.Jobs))
			continue
		case <-timer.C:
		}
		now := s.now()
		if at.IsZero() || now.Before(at.Add(offset)) {
			continue
		}
		due = nil
		if batch := s.advance(q, at, now); len(batch) > 0 {
			fire(at, batch)
		}
	}
}

// pendingTicks maps each job of cfg to its pending tick: on start
// (catchUp) the current one (a tick still within its deadline is
// attempted: it may have lost its host; completed ticks are refused by
// epoch), after a reload the one in prev if the schedule still says so,
// else the next one.
func (s *Scheduler) pendingTicks(cfg *Config, prev map[string]time.Time, catchUp bool) map[string]time.Time {
	now := s.now()
	fresh := make(map[string]time.Time, len(cfg.Jobs))
	for _, j := range cfg.Jobs {
		if t, ok := prev[j.Name]; ok && !catchUp {
			// keep the pending tick if it is still what the schedule says
			if n := j.Next(t.Add(-time.Second)); n.Equal(t) {
				fresh[j.Name] = t
				continue
			}
		}
		if catchUp {
			fresh[j.Name] = current(j, now)
		} else {
			fresh[j.Name] = j.Next(now)
		}
	}
	return fresh
}

// advance takes the jobs due at at off q, sets each one's next pending
// tick, and returns those that may start now, in the config's order.
func (s *Scheduler) advance(q *tickQueue, at, now time.Time) []*Job {
	var batch []*Job
	for _, p := range q.take(at) {
		j := p.job
		if !startable(j, at, now) {
			// Woken too late for at: its deadline passed or a later
			// tick overtook it. c is the latest tick if it may still
			// start, else the next one.
			c := current(j, now)
			s.log.Warn("tick missed: the daemon was paused or the clock jumped; skipping to the current tick",
				"job", j.Name, "missed", at.UTC().Format(time.RFC3339),
				"deadline", j.DeadlineFor(at).UTC().Format(time.RFC3339),
				"now", now.UTC().Format(time.RFC3339Nano), "resume_with", c.UTC().Format(time.RFC3339))
			q.set(p, c)
			continue
		}
		batch = append(batch, j)
		q.set(p, j.Next(at))
	}
	return batch
}

// startable reports whether tick of j may be attempted at now: no later
// tick is due yet and the tick's deadline has not passed.
func startable(j *Job, tick, now time.Time) bool {
	if n := j.Next(tick); !n.IsZero() && !n.After(now) {
		return false
	}
	return now.Before(j.DeadlineFor(tick))
}

// current is the tick of j to attempt at now: the latest tick at or before
// now while its deadline has not passed, else the next tick.
func current(j *Job, now time.Time) time.Time {
	if p := j.Prev(now); !p.IsZero() && now.Before(j.DeadlineFor(p)) {
		return p
	}
	return j.Next(now)
}

// tickQueue holds the pending tick of every job that has one, earliest
// first (a binary heap, as robfig/cron and Nomad's periodic dispatcher
// keep): the tick loop looks at its head instead of scanning every job
// each time it wakes, so an idle daemon's loop costs O(1) per wake and a
// tick O(k log n) for its k jobs among n.
type tickQueue struct {
	items []*pendingTick
	// at maps each job (by name) to its pending tick; a job without one
	// (its schedule has no further tick) maps to the zero time.
	at map[string]time.Time
}

// pendingTick is one job's pending tick; order is the job's place in the
// config, which orders the jobs of one tick.
type pendingTick struct {
	job   *Job
	at    time.Time
	order int
	index int // in tickQueue.items
}

// newTickQueue builds the queue of cfg's jobs with their pending ticks
// (next maps each job to it; a zero time: none).
func newTickQueue(cfg *Config, next map[string]time.Time) *tickQueue {
	q := &tickQueue{at: next, items: make([]*pendingTick, 0, len(cfg.Jobs))}
	for i, j := range cfg.Jobs {
		if t := next[j.Name]; !t.IsZero() {
			q.items = append(q.items, &pendingTick{job: j, at: t, order: i, index: len(q.items)})
		}
	}
	heap.Init((*tickHeap)(q))
	return q
}

// earliest is the earliest pending tick (zero: none).
func (q *tickQueue) earliest() time.Time {
	if len(q.items) == 0 {
		return time.Time{}
	}
	return q.items[0].at
}

// due returns the jobs whose pending tick is at, in the config's order,
// without removing them: a walk of the heap below its head that stops at
// later ticks, O(k) for k such jobs.
func (q *tickQueue) due(at time.Time) []*Job {
	var found []*pendingTick
	var walk func(i int)
	walk = func(i int) {
		if i >= len(q.items) || !q.items[i].at.Equal(at) {
			return
		}
		found = append(found, q.items[i])
		walk(2*i + 1)
		walk(2*i + 2)
	}
	if !at.IsZero() {
		walk(0)
	}
	return jobsInOrder(found)
}

// take removes and returns the entries whose pending tick is at, in the
// config's order; set them again with set.
func (q *tickQueue) take(at time.Time) []*pendingTick {
	var out []*pendingTick
	for len(q.items) > 0 && q.items[0].at.Equal(at) {
		out = append(out, heap.Pop((*tickHeap)(q)).(*pendingTick))
	}
	slices.SortFunc(out, func(a, b *pendingTick) int { return a.order - b.order })
	return out
}

// set makes t the pending tick of p's job (zero: it has none left).
func (q *tickQueue) set(p *pendingTick, t time.Time) {
	q.at[p.job.Name] = t
	if t.IsZero() {
		return
	}
	p.at = t
	heap.Push((*tickHeap)(q), p)
}

func jobsInOrder(ps []*pendingTick) []*Job {
	slices.SortFunc(ps, func(a, b *pendingTick) int { return a.order - b.order })
	jobs := make([]*Job, len(ps))
	for i, p := range ps {
		jobs[i] = p.job
	}
	return jobs
}

// tickHeap is tickQueue as container/heap sees it: by tick, then by the
// jobs' order in the config.
type tickHeap tickQueue

func (h *tickHeap) Len() int { return len(h.items) }

func (h *tickHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.order < b.order
}

func (h *tickHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}

func (h *tickHeap) Push(x any) {
	p := x.(*pendingTick)
	p.index = len(h.items)
	h.items = append(h.items, p)
}

func (h *tickHeap) Pop() any {
	n := len(h.items) - 1
	p := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	return p
}
