package scheduler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecron/leasecron/internal/supervisor"
	"github.com/leasecron/leasecron/lease"
)

// Options configures a Scheduler beyond its Config.
type Options struct {
	// Logger receives the daemon's structured logs; nil discards them.
	Logger *slog.Logger
	// Metrics, when set, is updated with runs, lease outcomes and node health.
	Metrics *Metrics
	// Self is the executable re-run as the per-job supervisor
	// ("Self __supervise"); default os.Executable().
	Self string
	// ClockOffset skews this scheduler's clock. It exists for tests that
	// simulate hosts whose clocks disagree; never set it in production.
	ClockOffset time.Duration
	// Notify, when set, receives systemd status lines ("STATUS=...").
	Notify func(state string)
	// DryRun starts no job: a won tick is recorded (result "dry_run") and
	// completed at once. A dry-run scheduler uses lease keys, history logs,
	// retry entries and heartbeats of its own ("dry-run." before the job's
	// name; heartbeats in space "hosts.dry-run"), so it never takes or
	// completes a tick of live hosts on the same backend: run every host
	// of a fleet with it to see which host would run what (`leasecron run
	// --dry-run`); benchmarks run many schedulers in one process with it.
	// It reads the live pause flags.
	DryRun bool
	// Version is this build's version, announced in the heartbeats.
	Version string
	// JobStdout and JobStderr, when set, receive the jobs' output as the
	// jobs write it (`leasecron exec`: cron mails what a command prints)
	// instead of the log, line by line.
	JobStdout, JobStderr io.Writer
	// Backend is where the leases live (required): a Redlock over Redis
	// nodes, a PostgreSQL or MySQL table, an etcd or ZooKeeper cluster. The caller opens it (cmd/leasecron picks it from
	// the config) and closes it after Run returned.
	Backend lease.Backend
}

// Scheduler fires the jobs of a Config on every host of a fleet so that
// each tick of each job runs exactly once, on one host, under a lease in
// the backend. Create it with New, run it with Run, and Close it afterwards.
type Scheduler struct {
	opts Options
	log  *slog.Logger
	be   lease.Backend
	host string
	base *Config // backend and lease settings fixed at New

	cfg atomic.Pointer[Config]

	reload chan struct{}

	// spares are supervisors started ahead of the next tick (see
	// spareLoop); spareWake asks spareLoop to refill them.
	spares    chan *supervisor.Spare
	spareWake chan struct{}
	// contain is how the jobs' processes are kept together and killed
	// (supervisor.DetectContainment at New; the process tree for a dry
	// run, which starts none).
	contain supervisor.Containment

	// test holds the switches tests set (export_test.go); zero in
	// production.
	test testHooks

	// outlook is when a quorum votes again, shared by the ticks that
	// found none; retries paces their retries.
	outlook quorumOutlook
	retries pacer

	// lapsedUntil is the latest validity end of the leases left to run
	// out (see lapsed); Close waits for it.
	lapseMu     sync.Mutex
	lapsedUntil time.Time

	// started is when New ran (heartbeats carry it and derive their
	// versions from it).
	started time.Time
	// view is the live hosts from the last heartbeat read; pauses the
	// last read of the pause flags.
	view atomic.Pointer[fleetView]

	// pausedSet is each job's paused gauge as last set, for the config
	// pausedCfg (see notePaused).
	pausedMu  sync.Mutex
	pausedSet map[string]bool
	pausedCfg *Config

	// ranked is the last ranking computed (see rankFor).
	ranked atomic.Pointer[rankCache]
	pauses atomic.Pointer[pauses]

	// hooks queues the jobs' hook events (see hooks.go). noHookGuard and
	// noMissGuard, set by tests, fire hooks and record missed ticks
	// without their leases (negative controls of the once-per-event
	// tests).
	hooks       *hookQueue
	misses      *missQueue // ticks noted missed, to record (missqueue.go)
	noHookGuard bool
	noMissGuard bool

	mu      sync.Mutex
	running map[string]*runState // by job name
	slots   int                  // run slots taken (max_parallel)
	// healthNow is the servers' health as last seen (health).
	healthNow healthState
}

type healthState struct {
	checked time.Time
	ok      int
	nodes   int
	err     error
}

// New builds a Scheduler for cfg. It does not contact the backend yet.
func New(cfg *Config, opts Options) (*Scheduler, error) {
	if cfg == nil {
		return nil, errors.New("scheduler: nil config")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Self == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("scheduler: find own executable for the job supervisor: %w", err)
		}
		opts.Self = self
	}
	if opts.Backend == nil {
		return nil, errors.New("scheduler: no backend")
	}
	s := &Scheduler{
		opts:    opts,
		log:     opts.Logger,
		be:      opts.Backend,
		host:    cfg.ID,
		base:    cfg,
		reload:  make(chan struct{}, 1),
		running: map[string]*runState{},
		started: time.Now(),
		hooks:   newHookQueue(),
		misses:  newMissQueue(),

		spares:    make(chan *supervisor.Spare, maxSpares),
		spareWake: make(chan struct{}, 1),
	}
	if !opts.DryRun {
		s.contain = supervisor.DetectContainment()
	}
	s.cfg.Store(cfg)
	return s, nil
}

// Containment says how this daemon contains its jobs' processes: "cgroup
// PATH" (one cgroup v2 per job, killed with cgroup.kill) or "process tree"
// (the fallback; see ContainmentReason).
func (s *Scheduler) Containment() string { return s.contain.String() }

// ContainmentReason says why the process-tree containment is in force, ""
// with cgroups.
func (s *Scheduler) ContainmentReason() string { return s.contain.Reason() }

// Close closes the backend given in Options. Call it after Run returned.
// It first waits until the validity of every lease left to run out (a job
// whose processes could not be confirmed dead) has passed — at most
// lease.ttl, logged — since closing a backend may free such a lease at
// once (a ZooKeeper session's end deletes its ephemeral lock) while the
// job may still run.
func (s *Scheduler) Close() error {
	s.waitLapsed()
	return s.be.Close()
}

// now is the scheduler's clock (skewed by ClockOffset in tests).
func (s *Scheduler) now() time.Time {
	if s.test.clock != nil {
		return s.test.clock()
	}
	return time.Now().Add(s.opts.ClockOffset)
}

// until returns how long until t on the scheduler's clock.
func (s *Scheduler) until(t time.Time) time.Duration { return t.Sub(s.now()) }

// Reload swaps in a new schedule. Jobs that are running keep running under
// their old settings; the next ticks use the new ones. Changes to the
// backend section (config.Section.Equal) and the lease section need a restart and are reported as an error (the rest
// of the new config is still applied).
func (s *Scheduler) Reload(cfg *Config) error {
	if cfg == nil {
		return errors.New("reload: nil config")
	}
	var keep []string
	if !cfg.SameBackend(s.base) {
		keep = append(keep, "the backend section")
	}
	if cfg.Lease != s.base.Lease {
		keep = append(keep, "lease")
	}
	c := *cfg
	c.Backend, c.Lease, c.ID = s.base.Backend, s.base.Lease, s.base.ID
	c.Labels = s.base.Labels // a host's labels come from its command line
	s.cfg.Store(&c)
	for _, j := range c.Jobs {
		if err := s.CannotLimit(j); err != nil {
			s.log.Error("a job's limits cannot be applied on this host; this daemon will not run it", "job", j.Name, "err", err)
		}
	}
	for _, ch := range []chan struct{}{s.reload, s.spareWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if len(keep) > 0 {
		return fmt.Errorf("reload: changes to %s need a restart; kept the running values", strings.Join(keep, " and "))
	}
	return nil
}

// StatusLine summarises the scheduler in one line for systemd's STATUS=.
func (s *Scheduler) StatusLine() string {
	cfg := s.cfg.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	sort.Strings(names)
	q := "quorum unknown"
	if !s.healthNow.checked.IsZero() {
		state := "ok"
		if s.healthNow.err != nil {
			state = "LOST"
		}
		q = fmt.Sprintf("quorum %s (%d/%d nodes)", state, s.healthNow.ok, s.healthNow.nodes)
	}
	run := "idle"
	if len(names) > 0 {
		run = "running: " + strings.Join(names, ",")
	}
	return fmt.Sprintf("%d jobs, %s, %s", len(cfg.Jobs), q, run)
}

// Run fires ticks until ctx is cancelled. Then no new ticks start; running
// jobs get ShutdownGrace to finish while their leases keep being renewed,
// then they are stopped (SIGTERM, SIGKILL after kill_grace), and their
// leases are released without marking the tick completed, so another host
// can take it over. Run returns nil after a clean stop.
func (s *Scheduler) Run(ctx context.Context) error {
	// Ticks and takeovers stop with ctx; running jobs stop with hard.
	hard, stopHard := context.WithCancel(context.Background())
	defer stopHard()
	// Hooks outlive the jobs: the events of runs that end in the
	// shutdown grace are delivered (within hookDrain).
	defer s.startHooks()()
	var wg sync.WaitGroup

	wg.Add(4)
	go func() { // this host's heartbeat, the live hosts, the pause flags
		defer wg.Done()
		s.heartbeatLoop(ctx)
	}()
	go func() { // cold connections, opened before the first tick needs them
		defer wg.Done()
		s.warm(ctx)
	}()
	go func() { // health checker: metrics, STATUS= line
		defer wg.Done()
		s.healthLoop(ctx)
	}()
	go func() {
		defer wg.Done()
		// A dry run starts no job, so it keeps no spare supervisors
		// either (a process of its own executable each, maxSpares per
		// scheduler).
		if !s.opts.DryRun {
			s.spareLoop(ctx)
		}
	}()

	s.loop(ctx, func(tick time.Time, jobs []*Job) { s.fire(ctx, hard, &wg, tick, jobs) })

	// Shutdown: wait up to ShutdownGrace for running jobs.
	grace := s.cfg.Load().ShutdownGrace
	if n := s.runningCount(); n > 0 {
		s.log.Info("stopping: waiting for running jobs", "jobs", n, "grace", grace)
	}
	graceT := time.NewTimer(grace)
	defer graceT.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-graceT.C:
		s.log.Warn("shutdown grace over; stopping running jobs", "grace", grace)
		stopHard()
		<-done
	}
	return nil
}

func (s *Scheduler) runningCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// tickOffset is how long after at this host fires due, the jobs due at
// at: fireOffset when several hosts may try one of them at the same
// instant — a job with candidates 0, or no fresh view of the live hosts
// (every eligible host then ranks itself first) — and 0 when the ranking
// already gives each job one host at the tick (the others try a rank
// stagger later), so that those jobs start without the offset's delay.
func (s *Scheduler) tickOffset(cfg *Config, due []*Job, at time.Time) time.Duration {
	if s.liveHosts(cfg) == nil || slices.ContainsFunc(due, func(j *Job) bool { return j.Candidates == 0 }) {
		return s.fireOffset(at)
	}
	return 0
}

// fireOffset is how long after tick this host fires it: a value in
// [0, fireSpread) derived from the host's id and the tick, the same on
// every start of this host and different between hosts. Hosts that fired
// at the same instant would often split the nodes' votes so that nobody
// wins the first round; a different, small offset per host and tick lets
// one of them (a different one from tick to tick) usually get there first.
func (s *Scheduler) fireOffset(tick time.Time) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(s.host))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(tick.UnixNano()))
	h.Write(b[:])
	return time.Duration(h.Sum64() % uint64(fireSpread))
}

const (
	// warmAhead is how much time before a tick the loop must have to
	// compute the tick's ranking ahead of it (warmRanking).
	warmAhead = 20 * time.Millisecond
	// fireSpread bounds fireOffset.
	fireSpread = 3 * time.Millisecond
	// splitRetries is how many times a loser that saw the tick held by
	// another host on fewer than a quorum of nodes retries after a short
	// random delay instead of waiting for the holder's TTL (the votes may
	// have split with no winner).
	// The delay is random in [0, splitRetryBase << attempt): the lease
	// client already waits for the cleanup of the lost try, so a retry
	// can come soon; the doubling spreads hosts that keep colliding.
	splitRetries   = 6
	splitRetryBase = 5 * time.Millisecond
	// heldRecheck is when a loser that saw the tick held on a quorum (no
	// split) looks once more before waiting for the holder's TTL: by then
	// the holder's attempt has been decided (a batch of a few thousand
	// keys included), and one that failed after all has been cleaned up.
	// Without split retries for such losers, a tick of many jobs costs
	// the losing hosts one more round instead of up to splitRetries.
	heldRecheck = 500 * time.Millisecond
	// lastTryMargin is how long before the tick's deadline the last
	// acquisition attempt is made.
	lastTryMargin = 50 * time.Millisecond
	// noQuorumFirst and noQuorumMax bound the backoff of a tick whose
	// lease found no quorum: the wait doubles from the first to the max.
	noQuorumFirst = 100 * time.Millisecond
	noQuorumMax   = 5 * time.Second
	// clockRecheck bounds how long the tick loop sleeps before it reads
	// the clock again, so that a clock stepped forward is noticed soon.
	clockRecheck = time.Second
	// warmTimeout bounds the opening of the nodes' connections at start
	// (Backend.Warm); a node that takes longer is left to the rounds.
	warmTimeout = 2 * time.Second
)

// warm opens the nodes' connections (Backend.Warm), for at most
// warmTimeout. A node that fails is left alone: the rounds that follow
// report it.
func (s *Scheduler) warm(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	_ = s.be.Warm(wctx)
}
