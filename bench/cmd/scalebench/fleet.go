package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/leasecron/leasecron/backend"
	"github.com/leasecron/leasecron/scheduler"
)

// scenario is one measured tick: hosts schedulers on one store, jobs jobs
// sharing the tick, each tried by candidates hosts (0: every host).
type scenario struct {
	hosts, jobs, candidates int
	// timeout, when not 0, replaces the store's request timeout.
	timeout time.Duration
	// bound, when not 0, replaces settings.bound.
	bound time.Duration
}

func (s scenario) String() string {
	t := ""
	if s.timeout > 0 {
		t = ", timeout " + s.timeout.String()
	}
	return fmt.Sprintf("%d hosts × %d jobs, candidates %d%s", s.hosts, s.jobs, s.candidates, t)
}

// result is what one scenario measured.
type result struct {
	scenario
	store string
	// converge is how long the hosts took, from the start of the first
	// scheduler, until every one saw all of them in the heartbeats.
	converge time.Duration
	// wonAll and recordedAll are the times from the tick until every job's
	// tick was won, and recorded (runs_total counted); 0 if not within the
	// bound, then won/recorded say how many were.
	wonAll, recordedAll time.Duration
	won, recorded       int
	// firstWon is from the tick until the first win: it shows that the
	// hosts fired the tick on time.
	firstWon time.Duration
	bound    time.Duration
	// runs is runs_total{result="dry_run"} summed over the hosts after
	// the settle time; twice counts jobs with more than one run.
	runs, twice int
	// perHost is runs per host, sorted descending.
	perHost []int
	// reqDecided: requests from just before the tick until every job was
	// recorded (Redis only; -1 otherwise); reqTotal: until the standby time
	// plus the settle time. Both minus the background rate (heartbeats,
	// pause flags, health pings) measured just before the tick.
	reqDecided, reqTotal int64
	background           float64 // requests per second before the tick
	// work is, for Redis, every command the nodes executed for the tick
	// (those the scripts called included), like reqTotal; -1 otherwise.
	work           int64
	standby        int // standby_attempts_total over the hosts
	outcomes       map[string]int
	warnings       map[string]int
	peakRSS        int64 // bytes, the most RSS sampled (every 20 ms) from the tick on
	peakGoroutines int
	load           string
	err            string
}

// settings are the fleet settings every scenario shares.
type settings struct {
	heartbeat    time.Duration
	standbyDelay time.Duration
	ttl          time.Duration
	lead         time.Duration // from the end of the baseline window to the tick
	baseline     time.Duration // length of the background-rate window
	bound        time.Duration // how long after the tick the decision may take
	maxRSS       int64
}

// configFor parses a config of sc.jobs jobs that all tick once a day at
// tick (UTC), for host h000 on st.
func configFor(st store, space string, sc scenario, set settings, tick time.Time) (*scheduler.Config, error) {
	var b strings.Builder
	b.Grow(sc.jobs * 64)
	fmt.Fprintf(&b, "id: h000\n%s", st.section(space, sc.timeout))
	fmt.Fprintf(&b, "lease:\n  ttl: %s\nheartbeat: %s\n", set.ttl, set.heartbeat)
	// deadline: a tick may start up to 10m late (yesterday's tick is long
	// past at start); standby_delay: when the standby hosts look.
	fmt.Fprintf(&b, "defaults:\n  candidates: %d\n  standby_delay: %s\n  deadline: 10m\n  history_limit: 5\njobs:\n",
		sc.candidates, set.standbyDelay)
	u := tick.UTC()
	spec := fmt.Sprintf("%d %d %d * * *", u.Second(), u.Minute(), u.Hour())
	for i := range sc.jobs {
		fmt.Fprintf(&b, "  - {name: j%05d, schedule: %q, shell: \"true\"}\n", i, spec)
	}
	cfg, err := scheduler.Parse(strings.NewReader(b.String()), "scalebench.yaml")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// host is one simulated host: a scheduler with its own backend client and
// metrics.
type host struct {
	id  string
	s   *scheduler.Scheduler
	be  backend.Backend
	reg *captureReg
	cfg scheduler.Config
}

// runScenario starts sc.hosts dry-run schedulers on st, waits until each
// sees all hosts in the heartbeats, moves every job's tick to a few
// seconds ahead, and measures that tick.
func (b *bench) runScenario(ctx context.Context, st store, space string, sc scenario) (res result) {
	set := b.set
	if sc.bound > 0 {
		set.bound = sc.bound
	}
	res = result{scenario: sc, store: st.name(), reqDecided: -1, work: -1, bound: set.bound}
	fail := func(err error) result { res.err = err.Error(); return res }
	log := func(format string, args ...any) {
		fmt.Fprintf(b.log, "%s %s %s: %s\n", time.Now().UTC().Format("15:04:05.000"), st.name(), sc, fmt.Sprintf(format, args...))
	}
	runtime.GC()

	parseStart := time.Now()
	far, err := configFor(st, space, sc, set, time.Now().Add(2*time.Hour))
	if err != nil {
		return fail(err)
	}
	parse := time.Since(parseStart)
	t := newTally(sc.jobs)
	logger := slog.New(handler{t: t})
	hosts := make([]*host, sc.hosts)
	start := time.Now()
	for i := range hosts {
		h := &host{id: fmt.Sprintf("h%03d", i), reg: newCaptureReg()}
		h.be, err = st.open(ctx, space, sc.timeout)
		if err != nil {
			for _, o := range hosts[:i] {
				_ = o.be.Close()
			}
			return fail(fmt.Errorf("host %s: %w", h.id, err))
		}
		h.cfg = *far
		h.cfg.ID = h.id
		h.s, err = scheduler.New(&h.cfg, scheduler.Options{
			DryRun: true, Backend: h.be, Metrics: scheduler.NewMetrics(h.reg), Logger: logger,
			Self: "/nonexistent/leasecron-dry-run", Version: "scalebench",
		})
		if err != nil {
			return fail(err)
		}
		hosts[i] = h
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			res.err += "; schedulers still running 60 s after the stop"
		}
		for _, h := range hosts {
			_ = h.s.Close()
		}
	}()
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.s.Run(rctx)
		}()
	}
	log("%d schedulers started in %s (config parsed in %s)", sc.hosts, time.Since(start).Round(time.Millisecond), parse.Round(time.Millisecond))

	// Every host sees every host.
	for {
		seen := sc.hosts
		for _, h := range hosts {
			seen = min(seen, int(h.reg.value("leasecron_fleet_hosts")))
		}
		if seen == sc.hosts {
			break
		}
		if time.Since(start) > 60*time.Second {
			return fail(fmt.Errorf("after 60 s some host saw only %d of %d hosts in the heartbeats", seen, sc.hosts))
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return fail(ctx.Err())
		}
	}
	res.converge = time.Since(start)
	log("every host sees %d hosts after %s", sc.hosts, res.converge.Round(time.Millisecond))

	// The measured tick: after the parse of the config, the reloads (each
	// host reschedules every job: about 1.5 ms per host on this machine),
	// the lead and the baseline window.
	lead := set.baseline + set.lead + 2*parse + time.Duration(sc.hosts)*150*time.Millisecond
	tick := time.Now().Add(lead).Truncate(time.Second).Add(time.Second)
	near, err := configFor(st, space, sc, set, tick)
	if err != nil {
		return fail(err)
	}
	for _, h := range hosts {
		c := *near
		c.ID = h.id
		if err := h.s.Reload(&c); err != nil {
			return fail(fmt.Errorf("reload %s: %w", h.id, err))
		}
	}
	if left := time.Until(tick); left < set.baseline+time.Second {
		return fail(fmt.Errorf("setup too slow: the reloads left %s before the tick, less than the baseline window and 1 s", left.Round(time.Millisecond)))
	}
	// The background rate, then the tick.
	winStart := time.Until(tick) - set.baseline - 300*time.Millisecond
	if !sleep(ctx, winStart) {
		return fail(ctx.Err())
	}
	w0 := mustWork(ctx, st)
	c0, t0 := mustCount(ctx, st)
	if !sleep(ctx, time.Until(tick.Add(-300*time.Millisecond))) {
		return fail(ctx.Err())
	}
	c1, t1 := mustCount(ctx, st)
	w1 := mustWork(ctx, st)
	by1 := byCommand(ctx, st)
	if c0 < 0 || c1 < 0 {
		return fail(fmt.Errorf("could not read the %s request counter", st.name()))
	}
	res.background = float64(c1-c0) / t1.Sub(t0).Seconds()
	res.load = loadAvg()
	log("background %.0f requests/s; tick at %s", res.background, tick.Format("15:04:05"))

	if b.cpuProfile != "" {
		if f, err := os.Create(b.cpuProfile + "." + space); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
			}
		}
	}
	// Until every job was won and recorded, or the bound.
	bound := time.NewTimer(time.Until(tick.Add(set.bound)))
	defer bound.Stop()
	watch := time.NewTicker(20 * time.Millisecond)
	defer watch.Stop()
	var wonAt, recAt time.Time
	aborted := ""
	for recAt.IsZero() && aborted == "" {
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case wonAt = <-t.wonAll:
		case recAt = <-t.finishedAll:
		case <-bound.C:
			aborted = fmt.Sprintf("not decided within %s", set.bound)
		case <-watch.C:
			res.peakGoroutines = max(res.peakGoroutines, runtime.NumGoroutine())
			rss := currentRSS()
			res.peakRSS = max(res.peakRSS, rss)
			if set.maxRSS > 0 && rss > set.maxRSS {
				aborted = fmt.Sprintf("stopped: RSS %d MiB passed the %d MiB bound", rss>>20, set.maxRSS>>20)
			}
		}
	}
	if !recAt.IsZero() {
		if wonAt.IsZero() {
			wonAt = <-t.wonAll
		}
		res.wonAll, res.recordedAll = wonAt.Sub(tick), recAt.Sub(tick)
		if c2, t2 := mustCount(ctx, st); c2 >= 0 && st.name() == "redis" {
			res.reqDecided = c2 - c1 - int64(res.background*t2.Sub(t1).Seconds())
		}
		log("all won +%s, all recorded +%s", res.wonAll.Round(time.Millisecond), res.recordedAll.Round(time.Millisecond))
	} else {
		res.err = aborted
		log("%s: %d won, %d recorded", aborted, t.won.Load(), t.finished.Load())
	}
	res.won, res.recorded = int(t.won.Load()), int(t.finished.Load())
	if b.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if first := t.firstWon(); !first.IsZero() {
		res.firstWon = first.Sub(tick)
	}

	// The standby hosts' look, then the settle time of the counters.
	if aborted == "" {
		rest := time.Until(tick.Add(set.standbyDelay + time.Second))
		if !sleep(ctx, max(rest, 0)+st.settle()) {
			return fail(ctx.Err())
		}
		c3, t3 := mustCount(ctx, st)
		res.reqTotal = c3 - c1 - int64(res.background*t3.Sub(t1).Seconds())
		if w3 := mustWork(ctx, st); w0 >= 0 && w1 >= 0 && w3 >= 0 {
			rate := float64(w1-w0) / t1.Sub(t0).Seconds()
			res.work = w3 - w1 - int64(rate*t3.Sub(t1).Seconds())
		}
		if by3 := byCommand(ctx, st); by1 != nil && by3 != nil {
			var parts []string
			for k, v := range by3 {
				if d := v - by1[k]; d > 0 {
					parts = append(parts, fmt.Sprintf("%s %d", k, d))
				}
			}
			sort.Strings(parts)
			log("commands from the tick on (background included): %s", strings.Join(parts, ", "))
		}
	}
	res.peakRSS = max(res.peakRSS, currentRSS())
	res.peakGoroutines = max(res.peakGoroutines, runtime.NumGoroutine())
	b.collect(&res, hosts, t)
	log("runs %d (jobs run twice: %d), spread max/mean %.2f, requests %d (until recorded %d), work %d, standby attempts %d, first win +%s, outcomes %v, warnings %v",
		res.runs, res.twice, res.spread(), res.reqTotal, res.reqDecided, res.work, res.standby, res.firstWon.Round(time.Millisecond), res.outcomes, res.warnings)
	return res
}

// collect reads the runs per host and per job, the lease outcomes and the
// standby attempts from every host's metrics.
func (b *bench) collect(res *result, hosts []*host, t *tally) {
	perJob := map[string]int{}
	res.outcomes = map[string]int{}
	for _, h := range hosts {
		n := 0
		h.reg.each("leasecron_runs_total", func(l map[string]string, v float64) {
			if l["result"] == "dry_run" {
				n += int(v)
				perJob[l["job"]] += int(v)
			}
		})
		res.perHost = append(res.perHost, n)
		res.runs += n
		h.reg.each("leasecron_lease_acquire_total", func(l map[string]string, v float64) {
			res.outcomes[l["outcome"]] += int(v)
		})
		res.standby += int(h.reg.value("leasecron_standby_attempts_total"))
	}
	for _, n := range perJob {
		if n > 1 {
			res.twice++
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(res.perHost)))
	t.mu.Lock()
	res.warnings = maps.Clone(t.warnings)
	t.mu.Unlock()
}

// spread is max/mean of the runs per host.
func (r *result) spread() float64 {
	if len(r.perHost) == 0 || r.runs == 0 {
		return 0
	}
	return float64(r.perHost[0]) / (float64(r.runs) / float64(len(r.perHost)))
}

// mustCount reads st's request counter and the time; -1 on error.
func mustCount(ctx context.Context, st store) (int64, time.Time) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := st.requests(cctx)
	if err != nil {
		return -1, time.Now()
	}
	return n, time.Now()
}

// mustWork reads the work counter of a Redis store; -1 for other stores
// or on error.
func mustWork(ctx context.Context, st store) int64 {
	r, ok := st.(*redisStore)
	if !ok {
		return -1
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := r.work(cctx)
	if err != nil {
		return -1
	}
	return n
}

// byCommand is st's requests by command when it counts them so (Redis);
// nil otherwise.
func byCommand(ctx context.Context, st store) map[string]int64 {
	r, ok := st.(*redisStore)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	by, err := r.byCommand(cctx)
	if err != nil {
		return nil
	}
	return by
}

// sleep waits d; false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
