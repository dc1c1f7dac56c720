package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
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
// with heartbeat hb (and standby hosts off with noStandby) on a fresh
// 3-node cluster, and waits until every one sees all n hosts.
func startDryFleet(t *testing.T, n int, hb time.Duration, noStandby bool, jobs func() []*Job) *dryFleet {
	t.Helper()
	return startDryFleetWith(t, n, hb, jobs, func(_ int, s *Scheduler) { s.setTestHooks(func(h *testHooks) { h.noStandby = noStandby }) })
}

// startDryFleetWith is startDryFleet with prep(i, s) called on each
// scheduler (and its config, s.cfg) before it runs.
func startDryFleetWith(t *testing.T, n int, hb time.Duration, jobs func() []*Job, prep func(i int, s *Scheduler)) *dryFleet {
	t.Helper()
	cluster := redistest.Start(t, 3)
	f := &dryFleet{}
	for i := range n {
		cfg := tickConfig(t, cluster.URLs(), jobs()...)
		cfg.ID = fmt.Sprintf("h%d", i)
		cfg.Heartbeat = hb
		be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(cfg.Lease.TTL)}})
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetrics(prometheus.NewRegistry())
		s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		prep(i, s)
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
// host and the runs spread over the hosts. After one host stops, the
// ticks assigned to it are taken at the standby time by the first standby
// host while its heartbeat has not expired yet (heartbeats every 2s
// expire after 6s): the two ticks after the stop run in full.
func TestCandidatesSpreadAndStandby(t *testing.T) {
	t.Parallel()
	missing := candidatesAfterStop(t, false)
	if missing != 0 {
		t.Errorf("%d runs missing in the two ticks after a host stopped, want none", missing)
	}
}

// TestCandidatesStandbyNegativeControl: the same with the standby hosts
// switched off misses the stopped host's runs, so the check above can
// fail.
func TestCandidatesStandbyNegativeControl(t *testing.T) {
	t.Parallel()
	if missing := candidatesAfterStop(t, true); missing == 0 {
		t.Errorf("without standby hosts no run went missing after a host stopped: the check cannot fail")
	}
}

// candidatesAfterStop runs the fleet of TestCandidatesSpreadAndStandby
// (standby switched off with noStandby) and returns how many runs of the
// two ticks after a host stopped are missing.
func candidatesAfterStop(t *testing.T, noStandby bool) int {
	const hosts, njobs = 5, 40
	jobs := func() []*Job {
		js := make([]*Job, njobs)
		for i := range js {
			js[i] = &Job{Name: fmt.Sprintf("job%02d", i), Schedule: "@every 2s", Shell: "true",
				Candidates: 1, StandbyDelay: 300 * time.Millisecond, RetryBackoff: time.Second, HistoryLimit: 50}
		}
		return js
	}
	f := startDryFleet(t, hosts, 2*time.Second, noStandby, jobs)
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
	// Fresh nodes vote for ticks a TTL after their birth: wait for the
	// first runs, then two ticks with everyone up: every host runs some.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n, _ := total(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run in 20s")
		}
	}
	start, _ := total()
	time.Sleep(4000 * time.Millisecond)
	before, perHost := total()
	before -= start
	for h, n := range perHost {
		if n == 0 {
			t.Errorf("host h%d ran none of %d runs: %v", h, before, perHost)
		}
	}
	// Stop h0 right after a tick; count the next two ticks' runs, before
	// its heartbeat expires (6s).
	for time.Now().UnixMilli()%2000 > 100 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(700 * time.Millisecond) // this tick is decided, standby included
	f.cancel[0]()
	mid, _ := total()
	time.Sleep(3900 * time.Millisecond)
	after, _ := total()
	// Exactly once per tick: read each job's history.
	ctx := context.Background()
	for i := range njobs {
		s1 := f.scheds[1]
		raw, err := s1.be.Log(ctx, s1.logName(fmt.Sprintf("job%02d", i)), 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) == 0 {
			t.Fatalf("job%02d: no history under its dry-run log name", i)
		}
		seen := map[int64]string{}
		for _, rr := range raw {
			var r RunRecord
			if err := json.Unmarshal(rr.Data, &r); err != nil {
				t.Fatal(err)
			}
			if h, dup := seen[r.Tick.Unix()]; dup {
				t.Errorf("job%02d tick %s ran on %s and %s", i, r.Tick, h, r.Host)
			}
			seen[r.Tick.Unix()] = r.Host
		}
	}
	t.Logf("runs before the stop %d %v; after: %d in two ticks of %d jobs", before, perHost, after-mid, njobs)
	return 2*njobs - (after - mid)
}
