package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTickQueue: the heap of pending ticks gives, at every step of a
// simulated day of 300 jobs on 40 schedules (ticks shared by many jobs),
// the same earliest tick and the same due jobs, in the config's order, as
// a scan of every job, and moves each job on to its next tick.
func TestTickQueue(t *testing.T) {
	var jobs []*Job
	for i := range 300 {
		jobs = append(jobs, &Job{Name: fmt.Sprintf("j%03d", i), Schedule: fmt.Sprintf("@every %ds", 5*(1+i%40)), Shell: "true"})
	}
	cfg := tickConfig(t, nil, jobs...)
	rand.Shuffle(len(cfg.Jobs), func(i, j int) { cfg.Jobs[i], cfg.Jobs[j] = cfg.Jobs[j], cfg.Jobs[i] })
	now := time.Unix(1_900_000_003, 0)
	next := map[string]time.Time{}
	for _, j := range cfg.Jobs {
		next[j.Name] = j.Next(now)
	}
	want := func() (time.Time, []*Job) { // the scan the heap replaces
		var at time.Time
		for _, t := range next {
			if !t.IsZero() && (at.IsZero() || t.Before(at)) {
				at = t
			}
		}
		var due []*Job
		for _, j := range cfg.Jobs {
			if next[j.Name].Equal(at) {
				due = append(due, j)
			}
		}
		return at, due
	}
	q := newTickQueue(cfg, copyTicks(next))
	for step := 0; step < 2000; step++ {
		wantAt, wantDue := want()
		at := q.earliest()
		if !at.Equal(wantAt) {
			t.Fatalf("step %d: earliest %s, want %s", step, at, wantAt)
		}
		if due := q.due(at); !slices.Equal(due, wantDue) {
			t.Fatalf("step %d: due %d jobs, want %d (in the config's order)", step, len(due), len(wantDue))
		}
		taken := q.take(at)
		if len(taken) != len(wantDue) {
			t.Fatalf("step %d: took %d, want %d", step, len(taken), len(wantDue))
		}
		for i, p := range taken {
			if p.job != wantDue[i] {
				t.Fatalf("step %d: took %s at %d, want %s", step, p.job.Name, i, wantDue[i].Name)
			}
			n := p.job.Next(at)
			next[p.job.Name] = n
			q.set(p, n)
		}
		if !q.at[taken[0].job.Name].Equal(next[taken[0].job.Name]) {
			t.Fatalf("step %d: the queue's map was not updated", step)
		}
	}
}

func copyTicks(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
