package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	redisbackend "github.com/leasecron/leasecron/backend/redis"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
)

// dryFleet is n in-process schedulers in dry-run mode on shared Redis
// nodes, each with its own client and metrics.
type dryFleet struct {
	scheds  []*Scheduler
	metrics []*Metrics
	cancel  []context.CancelFunc
	wg      sync.WaitGroup
}

// startDryFleet starts n schedulers h0..h(n-1) of jobs (cloned per host)
// with heartbeat hb on a fresh 3-node cluster, and waits until every one
// sees all n hosts.
func startDryFleet(t *testing.T, n int, hb time.Duration, jobs func() []*Job) *dryFleet {
	t.Helper()
	cluster := redistest.Start(t, 3)
	f := &dryFleet{}
	for i := range n {
		cfg := tickConfig(t, cluster.URLs(), jobs()...)
		cfg.ID = fmt.Sprintf("h%d", i)
		cfg.Heartbeat = hb
		be, err := redisbackend.Open(cfg.Redis.Nodes, cfg.Redis.Prefix, lease.WithTimeout(200*time.Millisecond), lease.WithRestartGuard(cfg.Lease.TTL))
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetrics(prometheus.NewRegistry())
		s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		f.scheds, f.metrics, f.cancel = append(f.scheds, s), append(f.metrics, m), append(f.cancel, cancel)
		f.wg.Add(1)
		go func() { defer f.wg.Done(); _ = s.Run(ctx) }()
	}
	t.Cleanup(func() {
		for _, c := range f.cancel {
			c()
		}
		f.wg.Wait()
		for _, s := range f.scheds {
			_ = s.Close()
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		all := true
		for _, s := range f.scheds {
			if len(s.liveHosts(s.cfg.Load())) != n {
				all = false
			}
		}
		if all {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("hosts do not all see each other's heartbeats after 30s")
		}
	}
}

// runs returns, per host, how many dry runs of job it made.
func (f *dryFleet) runs(job string) []int {
	out := make([]int, len(f.metrics))
	for i, m := range f.metrics {
		out[i] = int(testutil.ToFloat64(m.runs.WithLabelValues(job, "dry_run")))
	}
	return out
}

// TestCandidatesSpreadAndStandby: 5 dry-run hosts, 40 jobs every 2s with
// one candidate each. Every tick of every job is decided by exactly one
// host, the runs spread over the hosts, and after one host stops, the
// ticks assigned to it are taken at the standby time by another host
// (its heartbeat has not expired yet: the first standby host tries).
func TestCandidatesSpreadAndStandby(t *testing.T) {
	const hosts, njobs = 5, 40
	jobs := func() []*Job {
		js := make([]*Job, njobs)
		for i := range js {
			js[i] = &Job{Name: fmt.Sprintf("job%02d", i), Schedule: "@every 2s", Shell: "true",
				Candidates: 1, StandbyDelay: 300 * time.Millisecond, RetryBackoff: time.Second, HistoryLimit: 50}
		}
		return js
	}
	f := startDryFleet(t, hosts, 300*time.Millisecond, jobs)
	total := func() (sum int, perHost []int) {
		perHost = make([]int, hosts)
		for i := range njobs {
			for h, n := range f.runs(fmt.Sprintf("job%02d", i)) {
				sum += n
				perHost[h] += n
			}
		}
		return sum, perHost
	}
	// Three ticks with everyone up.
	time.Sleep(6 * time.Second)
	before, perHost := total()
	if before == 0 {
		t.Fatalf("no runs in 6s")
	}
	for h, n := range perHost {
		if n == 0 {
			t.Errorf("host h%d ran none of %d runs: %v", h, before, perHost)
		}
	}
	// Stop h0; its jobs must still run every tick.
	f.cancel[0]()
	stopped := time.Now()
	time.Sleep(3 * time.Second) // past its last tick, into steady state
	mid, _ := total()
	time.Sleep(4 * time.Second) // two more ticks
	after, _ := total()
	if got := after - mid; got != 2*njobs {
		t.Errorf("%s after a host stopped: %d runs in two ticks of %d jobs, want exactly %d (once per tick)", time.Since(stopped).Round(time.Second), got, njobs, 2*njobs)
	}
	// Exactly once per tick overall: read each job's history.
	ctx := context.Background()
	for i := range njobs {
		recs, err := ReadHistory(ctx, f.scheds[1].be, fmt.Sprintf("job%02d", i), 100)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]string{}
		for _, r := range recs {
			if h, dup := seen[r.Tick.Unix()]; dup {
				t.Errorf("job%02d tick %s ran on %s and %s", i, r.Tick, h, r.Host)
			}
			seen[r.Tick.Unix()] = r.Host
		}
	}
}
