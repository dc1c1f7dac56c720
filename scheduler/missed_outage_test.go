package scheduler

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasecron/leasecron/config"
	"github.com/leasecron/leasecron/internal/testkit/redistest"
	"github.com/leasecron/leasecron/lease"
	"github.com/leasecron/leasecron/lease/redlock"
)

// TestMissedTickDuringStoreOutage: a host, a job no host may run every
// 2 s (deadline 1 s), heartbeats every 500 ms, one Redis node frozen
// (SIGSTOP) from 2 s before a tick until 2 s after it: the host cannot
// read the heartbeats for longer than they live, yet once the node is
// back the tick has exactly one record, missed with the reason
// no_eligible_host.
func TestMissedTickDuringStoreOutage(t *testing.T) {
	t.Parallel()
	recs := outageTickRecords(t, false)
	if len(recs) != 1 || recs[0].Result != "missed" || recs[0].Reason != MissNoEligibleHost {
		t.Errorf("the tick of the outage: records %+v; want one, missed, no_eligible_host", recs)
	}
}

// TestMissedTickDuringStoreOutageNegativeControl is
// TestMissedTickDuringStoreOutage with only a heartbeat read younger than
// three heartbeats counting: the tick goes unrecorded.
func TestMissedTickDuringStoreOutageNegativeControl(t *testing.T) {
	t.Parallel()
	if recs := outageTickRecords(t, true); len(recs) != 0 {
		t.Errorf("with only a fresh view counting the tick of the outage still has records %+v: the test cannot see it", recs)
	}
}

// outageTickRecords runs the scenario of TestMissedTickDuringStoreOutage
// (freshViewOnly: its negative control) and returns the records of the
// tick of the outage, waiting up to 30 s for one.
func outageTickRecords(t *testing.T, freshViewOnly bool) []RunRecord {
	node := redistest.Start(t, 1)
	j := &Job{Name: "nowhere", Schedule: "@every 2s", Shell: "true", Deadline: time.Second,
		RunOn: config.RunOn{Hosts: []string{"nobody"}}, Candidates: config.DefaultJob().Candidates}
	s, be := oneNodeScheduler(t, node, j)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	s.setTestHooks(func(h *testHooks) { h.freshViewOnly = freshViewOnly })
	go func() { defer wg.Done(); _ = s.Run(ctx); _ = s.Close() }()

	recorded := func(tick time.Time) []RunRecord {
		recs, _ := ReadHistory(ctx, be, DryRunJob("nowhere"), 100)
		var of []RunRecord
		for _, r := range recs {
			if r.Tick.Equal(tick) {
				of = append(of, r)
			}
		}
		return of
	}
	// A first tick recorded: the host has read the heartbeats.
	waitUntil(t, 20*time.Second, "a first missed tick on record", func() bool {
		recs, _ := ReadHistory(ctx, be, DryRunJob("nowhere"), 100)
		return len(recs) > 0
	})
	tick := time.Now().Add(3 * time.Second).Truncate(2 * time.Second).Add(2 * time.Second)
	time.Sleep(time.Until(tick.Add(-2 * time.Second)))
	node.Nodes[0].Pause()
	time.Sleep(time.Until(tick.Add(2 * time.Second)))
	node.Nodes[0].Resume()
	var recs []RunRecord
	for end := time.Now().Add(30 * time.Second); len(recs) == 0 && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		recs = recorded(tick)
	}
	return recs
}

// oneNodeScheduler is a dry-run Scheduler of j on the one node of
// cluster (heartbeats every 500 ms, requests bounded by 200 ms) whose
// supervisor cannot start, and its backend; the caller runs it.
func oneNodeScheduler(t *testing.T, cluster *redistest.Cluster, j *Job) (*Scheduler, lease.Backend) {
	t.Helper()
	cfg := tickConfig(t, cluster.URLs(), j)
	cfg.Heartbeat = 500 * time.Millisecond
	be, err := redlock.Open(context.Background(), redlock.Config{Nodes: redisOf(cfg).Nodes, Prefix: redisOf(cfg).Prefix,
		Options: []redlock.Option{redlock.WithTimeout(200 * time.Millisecond), redlock.WithRestartGuard(cfg.Lease.TTL)}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{Self: "/nonexistent/leasecron-supervisor", Backend: be, DryRun: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, be
}

// waitUntil polls cond every 100ms for up to within, and fails the test
// naming what it waited for if cond never held.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(within); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waited %v for %s", within, what)
		}
	}
}
