package scheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasecron/leasecron/lease"
)

// TestUnreadablePauseFlagsDoNotStartRun: a lease won while the pause
// flags cannot be read (the read just before the run failed) is released
// and the tick tried again later; the job does not start on a stale
// (here: empty) cache, which would run a job paused since. Control: the
// same won lease with a successful read of no flags attempts the run.
// (The fleet test TestPauseResumeFleet found a paused job run on
// ZooKeeper under load: its read of the flags timed out and the daemon
// used its last read.)
//
// It stays serial: its acquisitions have the test config's 50 ms request
// timeout, which parallel tests on a loaded machine made it miss.
func TestUnreadablePauseFlagsDoNotStartRun(t *testing.T) {
	j := &Job{Name: "paused", Schedule: "@every 2s", Shell: "true", Deadline: 30 * time.Second}
	s, cfg := tickScheduler(t, j)
	ctx := context.Background()
	tick := j.Prev(s.now())
	acquire := func() lease.Lease {
		t.Helper()
		l, err := s.be.Acquire(ctx, lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	follower := func(read func() (pauses, error)) *follower {
		return &follower{s: s, ctx: ctx, hard: ctx, cfg: cfg, j: j, tick: tick, pausesNow: read, log: s.log}
	}

	l := acquire()
	unreadable := errors.New("injected: the pause flags could not be read")
	_, stop, err := follower(func() (pauses, error) { return nil, unreadable }).won(l, j.DeadlineFor(tick), true, 0)
	info, rec := lastRun(t, s, j.Name)
	switch {
	case stop:
		t.Errorf("won with unreadable pause flags: the tick was given up, want it tried again")
	case !errors.Is(err, errPauseRead) || !errors.Is(err, unreadable):
		t.Errorf("won with unreadable pause flags: error %v, want one that backs off (errPauseRead)", err)
	}
	if rec.Job != "" {
		t.Errorf("won with unreadable pause flags: the run was attempted: %+v", rec)
	}
	if info.Holder != "" || info.DoneEpoch >= tick.Unix() {
		t.Errorf("won with unreadable pause flags: the lease is held by %q (done epoch %d), want it released, the tick not completed", info.Holder, info.DoneEpoch)
	}

	// Control: a successful read without flags starts the run (which
	// fails to start here: the test's supervisor does not exist).
	l = acquire()
	follower(func() (pauses, error) { return pauses{}, nil }).won(l, j.DeadlineFor(tick), true, 0)
	if _, rec := lastRun(t, s, j.Name); rec.Job != j.Name || rec.Fence != l.Fence() {
		t.Errorf("control: with the flags read (none set) no run was attempted under fence %d: %+v", l.Fence(), rec)
	}
}
