package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// tickConfig is a validated config for host h1 with the given nodes and
// jobs, with a 2 s TTL so that fresh nodes vote soon.
func tickConfig(t *testing.T, nodes []string, jobs ...*Job) *Config {
	t.Helper()
	c := config.Default()
	c.ID = "h1"
	if len(nodes) == 0 {
		nodes = []string{"redis://127.0.0.1:1/0"} // never dialled
	}
	c.Backend = config.NewRedis(nodes...)
	c.Lease.TTL, c.Lease.Renew = 2*time.Second, 500*time.Millisecond
	for _, j := range jobs {
		j.KillGrace = 300 * time.Millisecond
		// A job built in code gets no defaults: those Validate requires.
		if j.RetryBackoff == 0 {
			j.RetryBackoff = 10 * time.Second // the documented default
		}
		if j.HistoryLimit == 0 {
			j.HistoryLimit = 50 // the documented default
		}
	}
	c.Jobs = jobs
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// fired is one batch the tick loop handed to fire, with the scheduler's
// clock at that moment.
type fired struct {
	tick, now time.Time
}

// TestLoopClockStep steps the scheduler's clock while its tick loop runs
// (@every 2s, deadline 1s) and checks every tick the loop fires: it is
// fired at or after the tick and before the tick's deadline, on the
// stepped clock, and never twice. A step forward past a tick's deadline
// skips to the next tick; a step forward into a tick's deadline catches
// that tick up (and only that one); a step back fires nothing again.
func TestLoopClockStep(t *testing.T) {
	t.Parallel()
	j := &Job{Name: "step", Schedule: "@every 2s", Shell: "true", Deadline: time.Second}
	cfg := tickConfig(t, nil, j)
	var offset atomic.Int64
	s := &Scheduler{
		host:   "h1",
		log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		reload: make(chan struct{}, 1),
	}
	s.setTestHooks(func(h *testHooks) {
		h.clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		// The loop notices a step within 20ms (1s in production), so
		// where each step lands is known to within that.
		h.recheck = 20 * time.Millisecond
	})
	s.cfg.Store(cfg)
	t0 := time.Unix(1_900_000_000, 0) // a tick of @every 2s
	offset.Store(int64(time.Until(t0.Add(-300 * time.Millisecond))))

	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan fired, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.loop(ctx, func(tick time.Time, jobs []*Job) {
			ch <- fired{tick: tick, now: s.now()}
		})
	}()
	defer func() { cancel(); <-done }()

	var all []fired
	// expect waits for the next fired tick and checks it is want.
	expect := func(what string, want time.Time) {
		t.Helper()
		select {
		case f := <-ch:
			all = append(all, f)
			if !f.tick.Equal(want) {
				t.Fatalf("%s: fired tick t0+%v at t0+%v, want tick t0+%v", what,
					f.tick.Sub(t0), f.now.Sub(t0), want.Sub(t0))
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no tick fired within 15s, want t0+%v", what, want.Sub(t0))
		}
	}
	step := func(d time.Duration) { offset.Add(int64(d)) }

	expect("first tick", t0)
	step(7500 * time.Millisecond) // now ≈ t0+7.5s: t0+6s's deadline has passed
	expect("after a step past a deadline", t0.Add(8*time.Second))
	step(4300 * time.Millisecond) // now ≈ t0+12.3s: t0+12s is within its deadline
	expect("after a step into a deadline", t0.Add(12*time.Second))
	expect("the tick after the catch-up", t0.Add(14*time.Second))
	step(-1500 * time.Millisecond) // now ≈ t0+12.5s: t0+14s already fired
	expect("after a step back", t0.Add(16*time.Second))

	for i, f := range all {
		if f.now.Before(f.tick) || !f.now.Before(j.DeadlineFor(f.tick)) {
			t.Errorf("tick t0+%v fired at t0+%v, outside [tick, deadline t0+%v)",
				f.tick.Sub(t0), f.now.Sub(t0), j.DeadlineFor(f.tick).Sub(t0))
		}
		if i > 0 && !f.tick.After(all[i-1].tick) {
			t.Errorf("tick t0+%v fired after tick t0+%v", f.tick.Sub(t0), all[i-1].tick.Sub(t0))
		}
	}
}

// TestStartable: a tick may be attempted from its time until its deadline
// or the next tick, whichever is first; current picks the latest tick
// within its deadline, else the next one.
func TestStartable(t *testing.T) {
	j := &Job{Name: "s", Schedule: "@every 10s", Shell: "true", Deadline: 3 * time.Second}
	long := &Job{Name: "l", Schedule: "@every 10s", Shell: "true", Deadline: 25 * time.Second}
	tickConfig(t, nil, j, long)
	t0 := time.Unix(1_900_000_000, 0)
	for _, tc := range []struct {
		job       *Job
		at        time.Duration
		startable bool
		current   time.Duration
	}{
		{j, 0, true, 0},
		{j, 2999 * time.Millisecond, true, 0},
		{j, 3 * time.Second, false, 10 * time.Second},
		{j, 9 * time.Second, false, 10 * time.Second},
		{j, 25 * time.Second, false, 30 * time.Second},
		{j, 21 * time.Second, false, 20 * time.Second},
		// a deadline longer than the interval: the next tick overtakes
		{long, 9 * time.Second, true, 0},
		{long, 10 * time.Second, false, 10 * time.Second},
	} {
		now := t0.Add(tc.at)
		if got := startable(tc.job, t0, now); got != tc.startable {
			t.Errorf("%s: startable(t0, t0+%v) = %v, want %v", tc.job.Name, tc.at, got, tc.startable)
		}
		if got := current(tc.job, now); !got.Equal(t0.Add(tc.current)) {
			t.Errorf("%s: current(t0+%v) = t0+%v, want t0+%v", tc.job.Name, tc.at, got.Sub(t0), tc.current)
		}
	}
}

// redisOf is the redis section of cfg.
func redisOf(cfg *Config) *config.RedisConfig { return cfg.Backend.(*config.RedisConfig) }

// tickScheduler starts three Redis nodes and a Scheduler for cfg's jobs on
// them whose supervisor cannot start (so no job ever runs: an attempt to
// run leaves a run record with result "error"), and waits until the nodes
// vote.
func tickScheduler(t *testing.T, jobs ...*Job) (*Scheduler, *Config) {
	t.Helper()
	cluster := redistest.Start(t, 3)
	cfg := tickConfig(t, cluster.URLs(), jobs...)
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(redisOf(cfg).Timeout), redlock.WithRestartGuard(cfg.Lease.TTL)}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// The first round writes each node's data marker; the nodes vote a
	// TTL (2s) after it, and for ticks a TTL after it: wait until the last
	// tick of an @every 2s job is that old.
	s.warm(context.Background())
	time.Sleep(5 * time.Second)
	return s, cfg
}

// lastRun reads the job's lease state and the run record stored beside it
// (zero if none).
func lastRun(t *testing.T, s *Scheduler, job string) (lease.Info, RunRecord) {
	t.Helper()
	info := inspectRetrying(t, s.be, s.key(job))
	var rec RunRecord
	if info.Note != "" {
		if err := json.Unmarshal([]byte(info.Note), &rec); err != nil {
			t.Fatalf("run record %q: %v", info.Note, err)
		}
	}
	return info, rec
}

// inspectRetrying reads key's lease state from b, trying again for up to
// 30 s while no quorum answers (the tests' nodes have a 50 ms timeout,
// which a loaded machine can miss on a read as on any request).
func inspectRetrying(t *testing.T, b lease.Backend, key string) lease.Info {
	t.Helper()
	ictx := ctxFor(t, 30*time.Second)
	info, err := b.Inspect(ictx, key)
	for errors.Is(err, lease.ErrNoQuorum) && ictx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		info, err = b.Inspect(ictx, key)
	}
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// acquireRetrying takes req on b, trying again for up to 30 s while no
// quorum answers (nodes that answer late on a loaded machine: what the
// callers test is what follows the acquisition).
func acquireRetrying(t *testing.T, b lease.Backend, req lease.Request) lease.Lease {
	t.Helper()
	actx := ctxFor(t, 30*time.Second)
	l, err := b.Acquire(actx, req)
	for errors.Is(err, lease.ErrNoQuorum) && actx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		l, err = b.Acquire(actx, req)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLateWinNotStarted: a lease won for a tick whose deadline passed
// during the acquisition (the daemon was paused, say) is released, and no
// run is attempted for that tick.
func TestLateWinNotStarted(t *testing.T) {
	t.Parallel()
	j := &Job{Name: "late", Schedule: "@every 2s", Shell: "true", Deadline: time.Second}
	s, cfg := tickScheduler(t, j)
	ctx := context.Background()
	tick := j.Prev(s.now().Add(-10 * time.Second)) // deadline long gone
	// No EpochTime: the tick is older than the test's fresh nodes, which
	// would not vote for it; this test is about the late win.
	l, err := s.be.Acquire(ctx, lease.Request{Key: s.key(j.Name), TTL: cfg.Lease.TTL, Epoch: tick.Unix(), Owner: owner(tick.Unix(), s.host)})
	if err != nil {
		t.Fatal(err)
	}
	s.followTick(ctx, ctx, cfg, j, tick, lease.Result{Lease: l}, 0)
	info, rec := lastRun(t, s, j.Name)
	if rec.Job != "" {
		t.Errorf("a run was attempted %s after its tick's deadline: %+v", rec.Start.Sub(j.DeadlineFor(tick)), rec)
	}
	if info.Holder != "" {
		t.Errorf("the unused lease is still held by %q", info.Holder)
	}
	if info.DoneEpoch >= tick.Unix() {
		t.Errorf("the tick that did not run was marked completed (done epoch %d)", info.DoneEpoch)
	}
}

// TestShortValidityRetried: a lease won with less validity left than the
// kill margin (the supervisor would kill the job at once) is released and
// the tick retried within its deadline with a fresh lease.
func TestShortValidityRetried(t *testing.T) {
	t.Parallel()
	j := &Job{Name: "short", Schedule: "@every 2s", Shell: "true", Deadline: 30 * time.Second}
	s, cfg := tickScheduler(t, j)
	ctx := context.Background()
	tick := j.Prev(s.now())
	short := s.killMargin() / 2
	l := acquireRetrying(t, s.be, lease.Request{Key: s.key(j.Name), TTL: short, Epoch: tick.Unix(), EpochTime: tick, Owner: owner(tick.Unix(), s.host)})
	s.followTick(ctx, ctx, cfg, j, tick, lease.Result{Lease: l}, 0)
	_, rec := lastRun(t, s, j.Name)
	switch {
	case rec.Job == "":
		t.Errorf("no run was attempted for the tick")
	case rec.Fence == l.Fence():
		t.Errorf("the run was attempted under the lease with %s of validity (fence %d), want a fresh lease", short, l.Fence())
	case !rec.Tick.Equal(tick):
		t.Errorf("run record for tick %s, want %s", rec.Tick, tick)
	}
}
