package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// lastRankedJob returns a job name for which, ranking by score alone,
// host h2 of h0..h2 comes last (rank 2).
func lastRankedJob(t *testing.T) string {
	t.Helper()
	hosts := []HostBeat{{Host: "h0"}, {Host: "h1"}, {Host: "h2"}}
	for i := range 1000 {
		name := fmt.Sprintf("x%d", i)
		if rankJobsBy([]*Job{{Name: name}}, hosts, "h2", nil, false).rank[name] == 2 {
			return name
		}
	}
	t.Fatal("no job name ranks h2 last")
	return ""
}

// idleLastHost runs three dry-run hosts with max_parallel 1: h0 and h1 are
// full (a run of another job in progress, in their heartbeats too), h2 is
// idle but ranked last for job x (every 2s, one candidate) by score. It
// returns how many ticks of x ran on each host over ten seconds once the
// servers vote, and how many ticks those seconds held.
func idleLastHost(t *testing.T, prep func(s *Scheduler)) (runs []int, ticks int) {
	t.Helper()
	name := lastRankedJob(t)
	jobs := func() []*Job {
		return []*Job{{Name: name, Schedule: "@every 2s", Shell: "true", Candidates: 1,
			StandbyDelay: 300 * time.Millisecond, RetryBackoff: time.Second, HistoryLimit: 50}}
	}
	f := startDryFleetWith(t, 3, time.Second, jobs, func(i int, s *Scheduler) {
		cfg := s.cfg.Load()
		cfg.MaxParallel = 1
		if i < 2 {
			// A long run of another job holds the host's one slot.
			s.reserve(cfg, 1)
			s.running["blocker"] = &runState{tick: time.Now(), started: time.Now()}
		}
		prep(s)
	})
	for deadline := time.Now().Add(30 * time.Second); f.scheds[2].Healthy(context.Background()) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the servers do not vote after 30s")
		}
	}
	// The servers vote for ticks a TTL (2s) after their data's birth: skip
	// past that, to a tick boundary.
	time.Sleep(3 * time.Second)
	for time.Now().UnixMilli()%2000 > 100 {
		time.Sleep(10 * time.Millisecond)
	}
	before := f.runs(name)
	time.Sleep(10 * time.Second)
	after := f.runs(name)
	for i := range after {
		after[i] -= before[i]
	}
	t.Logf("runs of %s per host over ten seconds: %v", name, after)
	return after, 5
}

// TestMaxParallelIdleHostRunsEveryTick: with the job's candidates full
// (max_parallel 1, a run in progress), the idle eligible host that ranks
// last by score ranks first by free slots and runs every tick.
func TestMaxParallelIdleHostRunsEveryTick(t *testing.T) {
	t.Parallel()
	runs, ticks := idleLastHost(t, func(*Scheduler) {})
	if runs[0] != 0 || runs[1] != 0 || runs[2] < ticks-1 {
		t.Errorf("runs per host %v over %d ticks: want every tick on h2 (the idle host), none on the full ones", runs, ticks)
	}
}

// TestMaxParallelStandbyWidens: ranking by score alone (the idle host
// last, a standby host past 2 × candidates), the standby looks that double
// the ranks that may try still get every tick run on the idle host.
func TestMaxParallelStandbyWidens(t *testing.T) {
	t.Parallel()
	runs, ticks := idleLastHost(t, func(s *Scheduler) { s.setTestHooks(func(h *testHooks) { h.rankIgnoresSlots = true }) })
	if runs[0] != 0 || runs[1] != 0 || runs[2] < ticks-1 {
		t.Errorf("runs per host %v over %d ticks: want every tick on h2 (the idle host), none on the full ones", runs, ticks)
	}
}

// TestMaxParallelIdleHostNegativeControl: with the ranking that ignores
// run slots and standby looks limited to 2 × candidates, the idle host
// never tries and the full candidates cannot run: ticks are skipped.
func TestMaxParallelIdleHostNegativeControl(t *testing.T) {
	t.Parallel()
	runs, ticks := idleLastHost(t, func(s *Scheduler) {
		s.setTestHooks(func(h *testHooks) { h.rankIgnoresSlots, h.standbyFixedReach = true, true })
	})
	if total := runs[0] + runs[1] + runs[2]; total >= ticks-1 {
		t.Errorf("runs per host %v over %d ticks with the old ranking and standby: the test no longer sees skipped ticks", runs, ticks)
	}
}

// TestRankFreeSlotsFirst: a job goes to a host with a free run slot, and
// hosts whose heartbeats say they are full rank after every host with a
// free one; with two free slots on one host, two jobs of a tick can both
// be assigned to it.
func TestRankFreeSlotsFirst(t *testing.T) {
	name := lastRankedJob(t)
	full := func(h string) HostBeat { return HostBeat{Host: h, Running: 1, MaxParallel: 1} }
	hosts := []HostBeat{full("h0"), full("h1"), {Host: "h2", MaxParallel: 1}}
	if r := rankJobs([]*Job{{Name: name}}, hosts, "h2", nil).rank[name]; r != 0 {
		t.Errorf("rank of the idle h2 for %s: %d, want 0", name, r)
	}
	for _, self := range []string{"h0", "h1"} {
		if r := rankJobs([]*Job{{Name: name}}, hosts, self, nil).rank[name]; r != 1 && r != 2 {
			t.Errorf("rank of the full %s for %s: %d, want 1 or 2 (after h2)", self, name, r)
		}
	}
	// Ignoring the slots, h2 is last.
	if r := rankJobsBy([]*Job{{Name: name}}, hosts, "h2", nil, false).rank[name]; r != 2 {
		t.Errorf("rank of h2 by score alone: %d, want 2", r)
	}
	// h2 with room for two: both jobs of the tick go to it.
	hosts[2].MaxParallel = 2
	jobs := []*Job{{Name: name}, {Name: name + "-b"}}
	r := rankJobs(jobs, hosts, "h2", nil)
	if r.rank[name] != 0 || r.rank[name+"-b"] != 0 {
		t.Errorf("ranks of h2 with two free slots: %v, want 0 for both jobs", r.rank)
	}
}

// slotFreedMidTick runs one dry-run host with max_parallel 1 whose slot a
// run of another job holds at a tick of job f (every 8s, deadline 7s); the
// slot frees up a second after the tick. It returns how many runs of that
// tick the host made: runs counted before the tick's deadline, which no
// run of the next tick can be (a loaded machine may take seconds to run
// the tick once the slot is free).
func slotFreedMidTick(t *testing.T, dropWhenFull bool) int {
	t.Helper()
	const every, deadline = 8 * time.Second, 7 * time.Second
	jobs := func() []*Job {
		return []*Job{{Name: "f", Schedule: "@every 8s", Deadline: deadline, Shell: "true", RetryBackoff: time.Second, HistoryLimit: 50}}
	}
	f := startDryFleetWith(t, 1, time.Second, jobs, func(_ int, s *Scheduler) {
		s.setTestHooks(func(h *testHooks) { h.dropWhenFull = dropWhenFull })
		s.cfg.Load().MaxParallel = 1
	})
	s := f.scheds[0]
	for deadline := time.Now().Add(30 * time.Second); s.Healthy(context.Background()) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the servers do not vote after 30s")
		}
	}
	time.Sleep(3 * time.Second) // ticks a TTL younger than the servers' data
	// Fill the host's slot, then wait for a tick.
	for s.reserve(s.cfg.Load(), 1) != 1 {
		time.Sleep(10 * time.Millisecond) // a run of f holds it
	}
	s.mu.Lock()
	s.running["blocker"] = &runState{tick: time.Now(), started: time.Now()}
	s.mu.Unlock()
	for time.Now().UnixMilli()%every.Milliseconds() > 100 {
		time.Sleep(10 * time.Millisecond)
	}
	tick := time.Now().Truncate(every)
	before := f.runs("f")[0]
	time.Sleep(time.Second)
	s.mu.Lock()
	delete(s.running, "blocker")
	s.mu.Unlock()
	s.unreserve()
	n := 0
	for time.Now().Before(tick.Add(deadline)) && n == 0 {
		time.Sleep(50 * time.Millisecond)
		n = f.runs("f")[0] - before
	}
	return n
}

// TestFullHostFollowsTick: a host that is full at a tick follows it and
// runs it when its slot frees up before the deadline.
func TestFullHostFollowsTick(t *testing.T) {
	t.Parallel()
	if n := slotFreedMidTick(t, false); n != 1 {
		t.Errorf("%d runs of the tick whose slot freed up a second after it, want 1", n)
	}
}

// TestFullHostDropsTickNegativeControl: leaving the tick to other hosts
// when full (there are none) skips it although the slot frees up.
func TestFullHostDropsTickNegativeControl(t *testing.T) {
	t.Parallel()
	if n := slotFreedMidTick(t, true); n != 0 {
		t.Errorf("%d runs of the tick with the full host dropping it: the test cannot see the skip", n)
	}
}
