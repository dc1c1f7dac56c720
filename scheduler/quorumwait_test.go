package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease/redlock"
)

// freshServerJobs is how many daily jobs the fresh-servers tests run.
const freshServerJobs = 40

// startOnFreshServers starts one dry-run scheduler of freshServerJobs
// daily jobs whose last tick was half an hour ago, on three Redis servers
// started just now, with restart detection on: the previous tick of every
// job is within its deadline (a daily job's deadline is its next tick, a
// day later) but older than the servers' data, so no server ever votes for
// it. It returns the scheduler's
// metrics, its log and a function counting the acquisition attempts that
// were not won.
func startOnFreshServers(t *testing.T, keepUnvotable bool) (*logBuffer, func() int) {
	t.Helper()
	cluster := redistest.Start(t, 3)
	prev := time.Now().Add(-30 * time.Minute).UTC()
	spec := fmt.Sprintf("%d %d * * *", prev.Minute(), prev.Hour())
	var jobs []*Job
	for i := range freshServerJobs {
		jobs = append(jobs, &Job{Name: fmt.Sprintf("daily-%02d", i), Schedule: spec, Shell: "true"})
	}
	cfg := tickConfig(t, cluster.URLs(), jobs...)
	// A request timeout long enough for a loaded machine: two nodes
	// timing out would turn the first refusal into a plain lack of
	// quorum, retried, and these tests are about the refusal of servers
	// whose data is younger than the tick.
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(time.Second), redlock.WithRestartGuard(cfg.Lease.TTL)}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the scheduler's log:\n%s", strings.Join(logs.lines("level="), "\n"))
		}
	})
	m := NewMetrics(prometheus.NewRegistry())
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	s.setTestHooks(func(h *testHooks) { h.keepUnvotable = keepUnvotable })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	attempts := func() int {
		n := 0
		for _, j := range jobs {
			for _, outcome := range []string{"held", "done", "no_quorum", "data_younger", "error"} {
				n += int(testutil.ToFloat64(m.acquires.WithLabelValues(j.Name, outcome)))
			}
		}
		return n
	}
	return logs, attempts
}

// waitAttempts waits (bounded) until every job made at least one attempt.
func waitAttempts(t *testing.T, attempts func() int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); attempts() < freshServerJobs; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d attempts after 30s, want one per job at least (%d)", attempts(), freshServerJobs)
		}
	}
}

// TestFreshServersGiveUpUnvotableTicks: ticks that no quorum will ever
// vote for (the servers' data is younger than them) are given up at the
// first refusal: one attempt per job, none after it however long the
// deadline lasts, and one log line for the batch.
func TestFreshServersGiveUpUnvotableTicks(t *testing.T) {
	t.Parallel()
	logs, attempts := startOnFreshServers(t, false)
	waitAttempts(t, attempts)
	first := attempts()
	// Several restart guards (2s) and no-quorum backoffs (up to 5s) later.
	time.Sleep(8 * time.Second)
	if n := attempts(); n != first || n > freshServerJobs {
		t.Errorf("%d attempts for %d ticks no quorum votes for (%d after the first refusals): want one each", n, freshServerJobs, first)
	}
	if lines := logs.lines("no quorum will ever vote for the tick"); len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("jobs=%d", freshServerJobs)) {
		t.Errorf("give-up lines: %q, want one for the batch of %d", lines, freshServerJobs)
	}
	if lines := logs.lines("level=INFO", "do not vote yet", "voting_at="); len(lines) != 1 {
		t.Errorf("lines saying when the servers vote: %q, want one", lines)
	}
	if warns := logs.lines("level=WARN"); len(warns) > 0 {
		t.Errorf("warnings on a fresh start: %q", warns)
	}
}

// TestFreshServersRetryUnvotableTicks is the negative control: with the
// give-up switched off, the same ticks are retried until their deadline,
// so the attempts keep growing with time.
func TestFreshServersRetryUnvotableTicks(t *testing.T) {
	t.Parallel()
	_, attempts := startOnFreshServers(t, true)
	waitAttempts(t, attempts)
	first := attempts()
	time.Sleep(8 * time.Second)
	if n := attempts(); n <= first+freshServerJobs {
		t.Errorf("%d attempts after %d (8s earlier) with the give-up off: want the retries to go on", n, first)
	}
}

// noQuorumRetries runs one dry-run scheduler of 400 hourly jobs on three
// Redis servers of which two are down (no quorum) and returns how many
// acquisition attempts it made over a window after the first batch, and
// the most its pace allows in that window (retryBurst + one per
// retryPace).
func noQuorumRetries(t *testing.T, unpaced bool) (attempts, allowed int) {
	t.Helper()
	const njobs = 400
	cluster := redistest.Start(t, 3)
	cluster.Nodes[1].Kill()
	cluster.Nodes[2].Kill()
	var jobs []*Job
	for i := range njobs {
		jobs = append(jobs, &Job{Name: fmt.Sprintf("nq-%03d", i), Schedule: "@hourly", Shell: "true"})
	}
	cfg := tickConfig(t, cluster.URLs(), jobs...)
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix, Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(cfg.Lease.TTL)}})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	s.setTestHooks(func(h *testHooks) { h.unpaced = unpaced })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = s.Close() })
	count := func() int {
		n := 0
		for _, j := range jobs {
			for _, outcome := range []string{"no_quorum", "data_younger"} {
				n += int(testutil.ToFloat64(m.acquires.WithLabelValues(j.Name, outcome)))
			}
		}
		return n
	}
	for end := time.Now().Add(30 * time.Second); count() < njobs; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d attempts after 30s, want one per job at least (%d)", count(), njobs)
		}
	}
	first, from := count(), time.Now()
	time.Sleep(3 * time.Second)
	attempts, elapsed := count()-first, time.Since(from)
	t.Logf("%d retries of %d jobs without a quorum in %s", attempts, njobs, elapsed.Round(time.Millisecond))
	return attempts, retryBurst + int(elapsed/retryPace) + 1
}

// TestNoQuorumRetriesPaced: without a quorum, the retries of many ticks
// are bounded for the host: no more in a window than the pace allows,
// whatever the number of jobs.
func TestNoQuorumRetriesPaced(t *testing.T) {
	if n, allowed := noQuorumRetries(t, false); n > allowed {
		t.Errorf("%d retries without a quorum in the window, the pace allows %d", n, allowed)
	}
}

// TestNoQuorumRetriesUnpacedNegativeControl: with the pace off, each
// tick's own backoff alone lets 400 jobs retry more often than that.
// This test and the one above stay serial: the storm is made by the CPU
// (a loaded one retries fewer times a second), so they do not run beside
// the package's parallel tests.
func TestNoQuorumRetriesUnpacedNegativeControl(t *testing.T) {
	if n, allowed := noQuorumRetries(t, true); n <= allowed {
		t.Errorf("%d retries without a quorum and without the pace (bound %d): the test cannot see the storm", n, allowed)
	}
}
