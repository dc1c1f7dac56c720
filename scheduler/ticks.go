package scheduler

import (
	"container/heap"
	"slices"
	"time"
)

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
