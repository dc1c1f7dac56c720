package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/testkit/pgtest"
	"github.com/leasecron/leasecron/lease"
	pgbe "github.com/leasecron/leasecron/lease/postgres"
	"github.com/leasecron/leasecron/lease/redlock"
	"github.com/leasecron/leasecron/scheduler"
)

// The size of BenchmarkScale's fleet, set with
// `go test -bench Scale -args -scale.hosts=100 -scale.jobs=10000`.
var (
	scaleHosts = flag.Int("scale.hosts", 100, "BenchmarkScale: simulated hosts")
	scaleJobs  = flag.Int("scale.jobs", 1000, "BenchmarkScale: jobs sharing the tick")
)

// scaleStore is a store under BenchmarkScale: how each simulated host
// opens its own client, the config section the schedulers get, and the
// requests the servers have executed so far.
type scaleStore struct {
	open     func(ctx context.Context, space string) (lease.Backend, error)
	section  func(space string) string
	requests func(ctx context.Context) (int64, error)
	settle   time.Duration // until a burst shows in requests
}

// BenchmarkScale decides one tick of -scale.jobs jobs on -scale.hosts
// simulated hosts (dry-run schedulers in this process, each with its own
// backend client), with rendezvous candidates (3) and with every host
// trying every job (candidates 0), on 5 Redis nodes and on PostgreSQL.
// It reports the requests the tick cost per job (the background of
// heartbeats and flags subtracted), the seconds from the tick until every
// job was won and recorded, the spread of runs over the hosts (max/mean)
// and the process's peak RSS. A job run twice fails the benchmark.
// Run it alone, once: -bench Scale -benchtime 1x.
func BenchmarkScale(b *testing.B) {
	for _, name := range []string{"redis", "postgres"} {
		b.Run("store="+name, func(b *testing.B) {
			st := startScaleStore(b, name)
			for i, cand := range []int{3, 0} {
				b.Run(fmt.Sprintf("hosts=%d/candidates=%d", *scaleHosts, cand), func(b *testing.B) {
					for n := 0; n < b.N; n++ {
						scaleTick(b, st, fmt.Sprintf("sc%d_%d_%d", i, n, time.Now().UnixNano()%1e6), cand)
					}
				})
			}
		})
	}
}

func startScaleStore(b *testing.B, name string) scaleStore {
	ctx := context.Background()
	if name == "postgres" {
		// Each host's pool holds up to max(4, CPUs) connections.
		srv := pgtest.Start(b, pgtest.WithMaxConnections(max(4, runtime.NumCPU())**scaleHosts+50))
		admin, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = admin.Close(ctx) })
		reads := int64(0)
		return scaleStore{
			open: func(ctx context.Context, space string) (lease.Backend, error) {
				return pgbe.Open(ctx, pgbe.Config{URL: srv.URL(), Table: space})
			},
			section: func(space string) string { return "postgres:\n  url: " + srv.URL() + "\n  table: " + space + "\n" },
			// Every statement of the backend is a transaction, and so is
			// each read of this counter (subtracted).
			requests: func(ctx context.Context) (int64, error) {
				var n int64
				err := admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
				reads++
				return n - reads, err
			},
			// A backend reports to pg_stat_database within 10 s once idle.
			settle: 11 * time.Second,
		}
	}
	addrs, admins := redisNodes(b, 5)
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a + "/0"
	}
	// The clients' restart guard: the nodes' markers are seconds old.
	const guard = time.Second
	return scaleStore{
		open: func(_ context.Context, space string) (lease.Backend, error) {
			return redlock.Open(context.Background(), redlock.Config{Nodes: urls, Prefix: space, Options: []redlock.Option{redlock.WithTimeout(time.Second), redlock.WithRestartGuard(guard)}})
		},
		section: func(space string) string {
			return "redis:\n  prefix: " + space + "\n  timeout: 1s\n  nodes: [" + strings.Join(urls, ", ") + "]\n"
		},
		requests: func(ctx context.Context) (int64, error) { return clientCommands(ctx, admins) },
		settle:   200 * time.Millisecond,
	}
}

// clientCommands sums the commands clients sent to the nodes (INFO
// commandstats: script calls and plain commands, not those the scripts
// call inside the server), less the INFO calls that read them.
func clientCommands(ctx context.Context, admins []*redis.Client) (int64, error) {
	var total int64
	for _, c := range admins {
		s, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(s, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			name, _ = strings.CutPrefix(name, "cmdstat_")
			base, _, _ := strings.Cut(name, "|")
			switch base {
			case "evalsha", "eval", "evalsha_ro", "eval_ro", "ping", "script", "hello", "client", "select":
			default:
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			n, _ := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
			if ok {
				total += n
			}
		}
	}
	return total, nil
}

// scaleConfig is a config of jobs jobs that all tick once a day at tick.
func scaleConfig(b *testing.B, st scaleStore, space string, candidates int, tick time.Time) *config.Config {
	var sb strings.Builder
	fmt.Fprintf(&sb, "id: h000\n%slease:\n  ttl: 30s\n", st.section(space))
	fmt.Fprintf(&sb, "defaults:\n  candidates: %d\n  standby_delay: 5s\n  deadline: 10m\n  history_limit: 5\njobs:\n", candidates)
	u := tick.UTC()
	spec := fmt.Sprintf("%d %d %d * * *", u.Second(), u.Minute(), u.Hour())
	for i := range *scaleJobs {
		fmt.Fprintf(&sb, "  - {name: j%05d, schedule: %q, shell: \"true\"}\n", i, spec)
	}
	cfg, err := config.Parse(strings.NewReader(sb.String()), "scale.yaml")
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// scaleTick starts the hosts, waits until every host sees every other in
// the heartbeats, moves the tick a few seconds ahead and measures it.
func scaleTick(b *testing.B, st scaleStore, space string, candidates int) {
	b.StopTimer()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hosts := make([]*scaleHost, *scaleHosts)
	t := newTally(*scaleJobs)
	far := scaleConfig(b, st, space, candidates, time.Now().Add(2*time.Hour))
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
		for _, h := range hosts {
			if h != nil {
				_ = h.s.Close()
				_ = h.be.Close()
			}
		}
	}()
	for i := range hosts {
		h, err := newScaleHost(ctx, st, space, fmt.Sprintf("h%03d", i), far, t)
		if err != nil {
			b.Fatal(err)
		}
		hosts[i] = h
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.s.Run(ctx) }()
	}
	waitFor(b, time.Minute, "every host sees every host", func() bool {
		for _, h := range hosts {
			if int(h.reg.value("leasecron_fleet_hosts")) < len(hosts) {
				return false
			}
		}
		return true
	})
	tick := time.Now().Add(5*time.Second + time.Duration(len(hosts))*20*time.Millisecond).Truncate(time.Second)
	near := scaleConfig(b, st, space, candidates, tick)
	for _, h := range hosts {
		c := *near
		c.ID = h.id
		if err := h.s.Reload(&c); err != nil {
			b.Fatal(err)
		}
	}
	// The background rate (heartbeats, flags, health) in the 2 s before
	// the tick.
	time.Sleep(time.Until(tick.Add(-2300 * time.Millisecond)))
	c0, t0 := mustRequests(b, st)
	time.Sleep(time.Until(tick.Add(-300 * time.Millisecond)))
	c1, t1 := mustRequests(b, st)
	background := float64(c1-c0) / t1.Sub(t0).Seconds()
	b.StartTimer()
	var peakRSS int64
	select {
	case <-t.finishedAll:
	case <-time.After(time.Until(tick.Add(90 * time.Second))):
		b.Fatalf("not every job recorded 90 s after the tick: %d won, %d recorded", t.won.Load(), t.finished.Load())
	}
	decided := time.Since(tick)
	b.StopTimer()
	peakRSS = max(peakRSS, rssBytes())
	// The standby hosts' look, then the counter's settle time.
	time.Sleep(time.Until(tick.Add(6*time.Second)) + st.settle)
	c2, t2 := mustRequests(b, st)
	reqs := float64(c2-c1) - background*t2.Sub(t1).Seconds()

	runs, most, twice := 0, 0, 0
	perJob := map[string]int{}
	for _, h := range hosts {
		n := 0
		h.reg.each("leasecron_runs_total", func(l map[string]string, v float64) {
			if l["result"] == "dry_run" {
				n += int(v)
				perJob[l["job"]] += int(v)
			}
		})
		runs += n
		most = max(most, n)
	}
	for _, n := range perJob {
		if n > 1 {
			twice++
		}
	}
	if twice > 0 {
		b.Fatalf("%d jobs ran more than once", twice)
	}
	b.ReportMetric(reqs/float64(*scaleJobs), "requests/job")
	b.ReportMetric(decided.Seconds(), "decided-s")
	b.ReportMetric(float64(most)/(float64(runs)/float64(len(hosts))), "spread")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-rss-MiB")
}

// scaleHost is one simulated host: a dry-run scheduler with its own
// backend client and metrics.
type scaleHost struct {
	id  string
	s   *scheduler.Scheduler
	be  lease.Backend
	reg *captureReg
	cfg config.Config
}

func newScaleHost(ctx context.Context, st scaleStore, space, id string, cfg *config.Config, t *tally) (*scaleHost, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	be, err := st.open(octx, space)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", id, err)
	}
	h := &scaleHost{id: id, be: be, reg: newCaptureReg(), cfg: *cfg}
	h.cfg.ID = id
	h.s, err = scheduler.New(&h.cfg, scheduler.Options{
		DryRun: true, Backend: be, Metrics: scheduler.NewMetrics(h.reg), Logger: slog.New(handler{t: t}),
		Self: "/nonexistent/leasecron-dry-run", Version: "bench",
	})
	if err != nil {
		_ = be.Close()
		return nil, err
	}
	return h, nil
}

func mustRequests(b *testing.B, st scaleStore) (int64, time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := st.requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return n, time.Now()
}

func waitFor(b *testing.B, bound time.Duration, what string, ok func() bool) {
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
