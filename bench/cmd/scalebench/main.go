// Command scalebench measures one tick of a large fleet: 100 simulated
// hosts (dry-run schedulers in this process, each with its own backend
// client and metrics) and 10,000 jobs that share the tick, on 5 Redis
// nodes and on one PostgreSQL server, with rendezvous candidates (3) and
// with every host trying every job (candidates 0). It reports the backend
// requests the tick cost, the time until every job's tick was decided,
// the spread of runs over the hosts and the memory, and writes them as the
// scalebench section of a markdown file (between the scalebench markers,
// added if missing; the rest of the file is kept).
//
//	cd bench && go run ./cmd/scalebench -out ../BENCHMARKS.md
//
// The servers it starts are killed by PID when it exits, also on SIGINT
// and SIGTERM. The default run takes about 4 minutes on two cores.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/leasecron/leasecron/bench/internal/probe"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/bench/internal/redisproc"
	"github.com/leasecron/leasecron/bench/internal/storeproc"
	"github.com/leasecron/leasecron/lease"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// bench holds the run's settings, servers and results.
type bench struct {
	set      settings
	log      io.Writer
	hosts    int
	jobs     int
	nodes    int
	backends []string
	// cpuProfile, when set, is where each scenario's measured tick is
	// profiled.
	cpuProfile string
	// redisTimeout is the Redis per-node timeout of the main scenarios.
	redisTimeout time.Duration

	mu    sync.Mutex
	redis []*redisproc.Server
	pg    *storeproc.Proc

	start   time.Time
	total   time.Duration
	loads   []string
	servers map[string]string
	units   map[string]string
	floors  []floorResult
	results []result
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	b := &bench{log: stderr}
	var out, backends, redisBin string
	var maxRSSMiB int64
	var quick bool
	fs.StringVar(&out, "out", "", "markdown file to write the scalebench section into (default: print the section)")
	fs.IntVar(&b.hosts, "hosts", 100, "simulated hosts")
	fs.IntVar(&b.jobs, "jobs", 10000, "jobs sharing the tick")
	fs.IntVar(&b.nodes, "nodes", 5, "redis-server nodes")
	fs.StringVar(&backends, "backends", "redis,postgres", "stores to measure, in order")
	fs.StringVar(&redisBin, "redis-server", "redis-server", "redis-server binary")
	fs.DurationVar(&b.set.heartbeat, "heartbeat", 5*time.Second, "the hosts' heartbeat (the default; 1s makes 100 hosts in one process miss their heartbeats)")
	fs.DurationVar(&b.set.standbyDelay, "standby-delay", 5*time.Second, "the jobs' standby_delay")
	fs.DurationVar(&b.set.ttl, "ttl", 30*time.Second, "lease.ttl")
	fs.DurationVar(&b.redisTimeout, "redis-timeout", time.Second, "redis.timeout (per-node request timeout; the daemon's default is 50ms)")
	fs.DurationVar(&b.set.bound, "bound", 60*time.Second, "how long after the tick a scenario may take to decide every job")
	fs.Int64Var(&maxRSSMiB, "max-rss", 4096, "stop a scenario when this process's RSS passes this many MiB (0: no bound)")
	fs.BoolVar(&quick, "quick", false, "smoke test: 10 hosts × 1,000 jobs")
	var heapProfile, cpuProfile string
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each scenario's measured tick to this file (+ the scenario's id)")
	fs.StringVar(&heapProfile, "heapprofile", "", "write a heap profile to this file when the RSS first passes half of -max-rss")
	var only string
	fs.StringVar(&only, "only", "", "run only the scenarios whose id (store/hosts/candidates, e.g. redis/100/3; floors: redis/floor) matches this regexp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if quick {
		b.hosts, b.jobs = 10, 1000
	}
	b.set.maxRSS = maxRSSMiB << 20
	b.set.baseline, b.set.lead = 3*time.Second, 2*time.Second
	b.backends = strings.Split(backends, ",")
	match := func(string) bool { return true }
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %w", err)
		}
		match = re.MatchString
	}
	if b.hosts < 1 || b.jobs < 1 || b.nodes < 1 {
		return errors.New("need -hosts, -jobs and -nodes >= 1")
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Kill the servers on a signal even if a scenario is stuck.
	defer probe.KillOnSignal(5*time.Second, b.killAll)()
	defer b.killAll()
	quit := make(chan struct{}) // ends the memory guard
	defer close(quit)
	if b.set.maxRSS > 0 {
		// Memory: a scenario stops at the bound (see runScenario), and
		// the whole run at 1.5 × the bound, checked apart from the
		// scenario's own loop. (No soft memory limit: a scenario that
		// sits near it made the GC run without pause and the cleanup
		// take minutes.)
		go b.memoryGuard(quit, heapProfile)
	}

	b.cpuProfile = cpuProfile
	b.start = time.Now()
	b.loads = append(b.loads, loadAvg())
	b.servers, b.units = map[string]string{}, map[string]string{}
	for i, name := range b.backends {
		st, err := b.startStore(ctx, name, redisBin)
		if err != nil {
			return err
		}
		b.servers[name], b.units[name] = st.servers(), st.unit()
		if match(name + "/floor") {
			b.floors = append(b.floors, b.floor(ctx, st, fmt.Sprintf("floor%d", i), b.jobs))
		}
		scenarios := []scenario{
			{hosts: 1, jobs: b.jobs, candidates: 3},
			{hosts: b.hosts, jobs: b.jobs, candidates: 3},
			// Every host tries every job: bounded shorter, it is not
			// expected to finish on a small machine.
			{hosts: b.hosts, jobs: b.jobs, candidates: 0, bound: b.set.bound * 3 / 4},
		}
		if name == "redis" && b.redisTimeout != lease.DefaultTimeout {
			// The daemon's default per-node timeout, on one host: the
			// context of the longer timeout above.
			scenarios = append(scenarios, scenario{hosts: 1, jobs: b.jobs, candidates: 3, timeout: lease.DefaultTimeout, bound: 30 * time.Second})
		}
		for j, sc := range scenarios {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !match(fmt.Sprintf("%s/%d/%d/%s", name, sc.hosts, sc.candidates, sc.timeout)) {
				continue
			}
			b.results = append(b.results, b.runScenario(ctx, st, fmt.Sprintf("sb%d_%d", i, j), sc))
		}
		st.close()
		b.stopStore(name)
		b.loads = append(b.loads, loadAvg())
	}
	b.total = time.Since(b.start)
	section := b.report()
	if out == "" {
		_, err := io.WriteString(stdout, section)
		return err
	}
	if err := writeSection(out, section); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	fmt.Fprintf(stderr, "done in %s; wrote the scalebench section of %s\n", b.total.Round(time.Second), out)
	return nil
}

// memoryGuard watches this process's RSS until quit closes: it writes a
// heap profile to heapProfile (if set) when the RSS first passes half of
// the bound, and kills the servers and exits when it passes 1.5 × the
// bound, which a scenario stopped at the bound should never reach.
func (b *bench) memoryGuard(quit <-chan struct{}, heapProfile string) {
	runtime.LockOSThread()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	profiled := heapProfile == ""
	for {
		select {
		case <-quit:
			return
		case <-t.C:
		}
		rss := currentRSS()
		if !profiled && rss > b.set.maxRSS/2 {
			profiled = true
			if f, err := os.Create(heapProfile); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
				fmt.Fprintf(b.log, "RSS %d MiB: heap profile written to %s\n", rss>>20, heapProfile)
			}
			if f, err := os.Create(heapProfile + ".goroutines"); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 1)
				_ = f.Close()
			}
		}
		if rss > b.set.maxRSS*3/2 {
			fmt.Fprintf(b.log, "scalebench: RSS %d MiB passed 1.5 × the %d MiB bound; stopping\n", rss>>20, b.set.maxRSS>>20)
			b.killAll()
			os.Exit(3)
		}
	}
}

// startStore starts the servers of name and returns the store on them.
func (b *bench) startStore(ctx context.Context, name, redisBin string) (store, error) {
	switch name {
	case "redis":
		st := &redisStore{timeout: b.redisTimeout}
		for range b.nodes {
			s, err := redisproc.Start(ctx, redisBin)
			if err != nil {
				return nil, err
			}
			b.mu.Lock()
			b.redis = append(b.redis, s)
			b.mu.Unlock()
			st.addrs = append(st.addrs, s.Addr)
			st.admin = append(st.admin, redis.NewClient(&redis.Options{Addr: s.Addr}))
		}
		info, err := st.admin[0].Info(ctx, "server").Result()
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				st.version = v
			}
		}
		// A node votes for a tick once it has been up, and its data
		// marker (written by the first client) has existed, for the
		// restart guard before the tick.
		st.guard = 5 * time.Second
		be, err := st.open(ctx, "warm", 0)
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = be.Warm(wctx)
		cancel()
		_ = be.Close()
		if err != nil {
			return nil, fmt.Errorf("redis: warm: %w", err)
		}
		if !sleep(ctx, st.guard+time.Second) {
			return nil, ctx.Err()
		}
		return st, nil
	case "postgres":
		// 100 hosts × 4 pooled connections (pgxpool's default on this
		// machine), and room to spare.
		p, err := storeproc.PostgresWith(ctx, fmt.Sprintf("max_connections=%d", max(4, runtime.NumCPU())*b.hosts+50))
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		b.pg = p
		b.mu.Unlock()
		st := &pgStore{url: p.URL(), version: p.Version}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st.admin, err = pgx.Connect(cctx, p.URL())
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want redis or postgres)", name)
}

// stopStore kills the servers of name.
func (b *bench) stopStore(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch name {
	case "redis":
		for _, s := range b.redis {
			_ = s.Stop()
		}
		b.redis = nil
	case "postgres":
		if b.pg != nil {
			_ = b.pg.Stop()
			b.pg = nil
		}
	}
}

// killAll kills every server still running.
func (b *bench) killAll() {
	b.stopStore("redis")
	b.stopStore("postgres")
}
